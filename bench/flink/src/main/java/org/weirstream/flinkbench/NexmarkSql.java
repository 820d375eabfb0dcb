package org.weirstream.flinkbench;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

/**
 * One Nexmark query as Flink SQL over the events weir's generator wrote ({@code weir bench
 * nexmark --write-events DIR}): the source table, views and query of nexmark-flink's suite
 * (resources nexmark/ddl.sql and nexmark/qN.sql), the source read by the filesystem connector
 * with the reference's watermark, in a local MiniCluster in this process.
 *
 * <pre>
 * java -cp weir-flink-bench.jar org.weirstream.flinkbench.NexmarkSql --version
 * java -cp weir-flink-bench.jar org.weirstream.flinkbench.NexmarkSql --query q5 --input DIR
 *     --checkpoint-dir DIR [--output DIR] [--backend hashmap|rocksdb] [--parallelism 2]
 *     [--checkpoint-interval-ms 1000] [--rest-port 8081] [--managed-memory SIZE]
 *     [--latency-dir DIR --base-time MS --latency-column C --latency-round-ms R
 *      --latency-offset-ms O --latency-from MS --latency-until MS]
 * </pre>
 *
 * With --latency-dir the run measures end-to-end latency instead ({@link Latency}): the source
 * is the weir-paced connector ({@link PacedSource}), which releases each event at its event
 * time on the run's shifted clock, and the sink the weir-latency connector ({@link
 * LatencySink}), which counts each row's latency from its due time (the column's time rounded
 * up to R ms, plus O ms: weir's nexmark.LatencySpec) and writes the histogram to the directory.
 * A query whose reference SELECT drops the column its rows are due from has a variant in
 * nexmark/latency/ that keeps it.
 *
 * Without --output the query's rows go to a blackhole sink (what the benchmark times); with it,
 * to files of Debezium JSON under DIR, committed at checkpoints: a changelog (an insert is
 * {@code "op":"c"}, a retraction {@code "op":"d"}), so updating queries are written too.
 * The table options are the reference suite's (mini-batches of 50,000 rows or 2 s, distinct
 * aggregates split); rocksdb checkpoints incrementally. --managed-memory sets the MiniCluster's
 * taskmanager.memory.managed.size (default: the MiniCluster's, 128 MiB), which the RocksDB
 * instances of each slot share (state.backend.rocksdb.memory.managed, true by default).
 */
public final class NexmarkSql {
    private static final Set<String> FLAGS =
            Set.of("query", "input", "output", "checkpoint-dir", "backend", "parallelism", "checkpoint-interval-ms", "rest-port", "managed-memory",
                    "latency-dir", "base-time", "latency-column", "latency-round-ms", "latency-offset-ms", "latency-from", "latency-until");

    private NexmarkSql() {}

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("--version")) {
            System.out.println(EnvironmentInformation.getVersion());
            return;
        }
        Map<String, String> a = flags(args);
        String query = required(a, "query");
        String input = new File(required(a, "input")).getAbsolutePath();
        String ckptDir = required(a, "checkpoint-dir");
        String output = a.get("output");
        String backend = a.getOrDefault("backend", "hashmap");
        int parallelism = Integer.parseInt(a.getOrDefault("parallelism", "2"));
        long interval = Long.parseLong(a.getOrDefault("checkpoint-interval-ms", "1000"));
        if (!backend.equals("hashmap") && !backend.equals("rocksdb")) {
            throw new IllegalArgumentException("--backend " + backend + ": want hashmap or rocksdb");
        }
        String latencyDir = a.get("latency-dir");
        if (output != null && latencyDir != null) {
            throw new IllegalArgumentException("--output and --latency-dir exclude each other");
        }
        String ddl = resource("ddl.sql");
        String sql = resource(query + ".sql");
        if (sql == null || !query.matches("q[0-9]+")) {
            throw new IllegalArgumentException("--query " + query + ": no such query in nexmark/");
        }
        if (latencyDir != null && resource("latency/" + query + ".sql") != null) {
            sql = resource("latency/" + query + ".sql");
        }

        Map<String, String> conf = new HashMap<>();
        conf.put("execution.checkpointing.interval", interval + " ms");
        conf.put("execution.checkpointing.dir", new File(ckptDir).getAbsoluteFile().toURI().toString());
        conf.put("execution.checkpointing.num-retained", "1");
        conf.put("state.backend.type", backend);
        conf.put("execution.checkpointing.incremental", Boolean.toString(backend.equals("rocksdb")));
        conf.put("parallelism.default", Integer.toString(parallelism));
        if (a.containsKey("managed-memory")) {
            conf.put("taskmanager.memory.managed.size", a.get("managed-memory"));
        }
        conf.put("rest.bind-address", "localhost");
        conf.put("rest.address", "localhost");
        conf.put("rest.port", a.getOrDefault("rest-port", "8081"));
        conf.put("web.checkpoints.history", "10000");
        // The reference suite's table options (nexmark-flink conf/config.yaml).
        conf.put("table.exec.mini-batch.enabled", "true");
        conf.put("table.exec.mini-batch.allow-latency", "2s");
        conf.put("table.exec.mini-batch.size", "50000");
        conf.put("table.optimizer.distinct-agg.split.enabled", "true");
        conf.put("table.local-time-zone", "UTC");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(Configuration.fromMap(conf));
        env.setParallelism(parallelism);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);

        String source = "'connector' = 'filesystem', 'path' = '" + input + "', 'format' = 'json'";
        String sink = output == null
                ? "'connector' = 'blackhole'"
                : "'connector' = 'filesystem', 'path' = '" + new File(output).getAbsolutePath() + "', 'format' = 'debezium-json'";
        if (latencyDir != null) {
            String dir = new File(latencyDir).getAbsolutePath();
            String base = required(a, "base-time");
            source = "'connector' = 'weir-paced', 'path' = '" + input + "', 'format' = 'json', 'latency-dir' = '" + dir
                    + "', 'base-time' = '" + base + "'";
            sink = "'connector' = 'weir-latency', 'latency-dir' = '" + dir + "', 'base-time' = '" + base
                    + "', 'column' = '" + required(a, "latency-column") + "', 'round-ms' = '" + a.getOrDefault("latency-round-ms", "1")
                    + "', 'offset-ms' = '" + a.getOrDefault("latency-offset-ms", "0") + "', 'count-from' = '" + required(a, "latency-from")
                    + "', 'count-until' = '" + required(a, "latency-until") + "'";
        }
        TableResult insert = null;
        for (String stmt : statements(ddl.replace("${SOURCE}", source) + "\n" + sql.replace("${SINK}", sink))) {
            TableResult r = tEnv.executeSql(stmt);
            if (stmt.regionMatches(true, 0, "INSERT", 0, 6)) {
                insert = r;
            }
        }
        if (insert == null) {
            throw new IllegalStateException(query + ".sql has no INSERT");
        }
        long start = System.nanoTime();
        insert.await();
        System.out.println("flink: " + query + " finished in " + (System.nanoTime() - start) / 1_000_000 + " ms");
    }

    /** The text of resource nexmark/name, null if there is none. */
    static String resource(String name) throws IOException {
        try (InputStream in = NexmarkSql.class.getResourceAsStream("/nexmark/" + name)) {
            return in == null ? null : new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    /** The statements of a script: comment lines dropped, split at a ';' that ends a line. */
    static List<String> statements(String script) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        for (String line : script.split("\n")) {
            if (line.trim().startsWith("--")) {
                continue;
            }
            String t = line.stripTrailing();
            if (t.endsWith(";")) {
                cur.append(t, 0, t.length() - 1);
                if (!cur.toString().isBlank()) {
                    out.add(cur.toString().trim());
                }
                cur.setLength(0);
            } else {
                cur.append(line).append('\n');
            }
        }
        if (!cur.toString().isBlank()) {
            out.add(cur.toString().trim());
        }
        return out;
    }

    private static Map<String, String> flags(String[] args) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            String k = args[i];
            if (!k.startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("want --flag value pairs, got " + k);
            }
            String name = k.substring(2);
            if (!FLAGS.contains(name)) {
                throw new IllegalArgumentException("unknown flag --" + name + " (want one of " + FLAGS + ")");
            }
            m.put(name, args[i + 1]);
        }
        return m;
    }

    private static String required(Map<String, String> a, String name) {
        String v = a.get(name);
        if (v == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return v;
    }
}
