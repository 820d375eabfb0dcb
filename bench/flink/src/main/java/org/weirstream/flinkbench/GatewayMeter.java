package org.weirstream.flinkbench;

import java.io.File;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.serialization.Encoder;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.streaming.api.functions.sink.filesystem.OutputFileConfig;
import org.apache.flink.streaming.api.functions.sink.filesystem.bucketassigners.BasePathBucketAssigner;
import org.apache.flink.streaming.api.functions.sink.filesystem.rollingpolicies.OnCheckpointRollingPolicy;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.WindowAssigner;
import org.apache.flink.streaming.api.windowing.triggers.EventTimeTrigger;
import org.apache.flink.streaming.api.windowing.triggers.Trigger;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

import org.weirstream.flinkbench.Records.Alert;
import org.weirstream.flinkbench.Records.LatencySample;
import org.weirstream.flinkbench.Records.ModelLatencyMinute;
import org.weirstream.flinkbench.Records.Orphan;
import org.weirstream.flinkbench.Records.RequestRecord;
import org.weirstream.flinkbench.Records.TenantCostMinute;

/**
 * GatewayMeter as a Flink DataStream job, the same graph, event-time semantics and outputs as
 * weir's (examples/gatewaymeter, specified in its doc.go): source → parse → keyBy(request_id) →
 * assemble → keyBy(tenant_id) → one-minute tenant-cost windows → alerts, and keyBy(model) →
 * one-minute model-latency windows, with orphans and dead letters on side outputs. Outputs are
 * JSON lines under OUTPUT/&lt;name&gt;/, committed at checkpoints (exactly once), in the format
 * {@code weir verify gatewaymeter} reads.
 *
 * <p>It runs in a local MiniCluster in this process:
 *
 * <pre>
 * java -jar weir-flink-bench.jar --input TRACE --output DIR --checkpoint-dir DIR
 *     [--backend hashmap|rocksdb] [--parallelism 2] [--checkpoint-interval-ms 1000] [--rest-port 8081]
 *     [--managed-memory SIZE] [--alignment-max-drift-ms 0] [--alignment-update-interval-ms 1000]
 * </pre>
 *
 * rocksdb checkpoints incrementally. --managed-memory sets the MiniCluster's
 * taskmanager.memory.managed.size (default: the MiniCluster's, 128 MiB), which the RocksDB
 * instances of each slot share (state.backend.rocksdb.memory.managed, true by default).
 *
 * <p>--alignment-max-drift-ms N &gt; 0 turns on Flink's watermark alignment (FLIP-182, FLIP-217):
 * the source's WatermarkStrategy gets withWatermarkAlignment("gateway-events", N ms, the update
 * interval), so that no split reads more than N ms of event time past the lowest watermark of
 * the source's subtasks; Flink pauses such a split (TraceSource's reader implements
 * pauseOrResumeSplits, so it is split-level alignment, not merely a subtask's) and a subtask
 * whose watermark is past it. --alignment-update-interval-ms (default 1000, Flink's) is how
 * often the subtasks report their watermarks and are told the maximum; it matters only with a
 * drift. 0, the default drift, means no alignment.
 */
public final class GatewayMeter {
    static final long WINDOW = 60_000;
    static final long ORPHAN_TIMEOUT = 5 * 60_000;
    static final long OUT_OF_ORDERNESS = 5_000;
    /** The watermark group of the source's alignment. */
    static final String ALIGNMENT_GROUP = "gateway-events";

    private GatewayMeter() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> a = flags(args);
        String input = required(a, "input");
        String output = required(a, "output");
        String ckptDir = required(a, "checkpoint-dir");
        String backend = a.getOrDefault("backend", "hashmap");
        int parallelism = Integer.parseInt(a.getOrDefault("parallelism", "2"));
        long interval = Long.parseLong(a.getOrDefault("checkpoint-interval-ms", "1000"));
        long maxDrift = Long.parseLong(a.getOrDefault("alignment-max-drift-ms", "0"));
        long alignInterval = Long.parseLong(a.getOrDefault("alignment-update-interval-ms", "1000"));
        if (maxDrift < 0) {
            throw new IllegalArgumentException("--alignment-max-drift-ms " + maxDrift + ": want 0 (no alignment) or more");
        }
        if (alignInterval <= 0) {
            throw new IllegalArgumentException("--alignment-update-interval-ms " + alignInterval + ": want more than 0");
        }
        if (!backend.equals("hashmap") && !backend.equals("rocksdb")) {
            throw new IllegalArgumentException("--backend " + backend + ": want hashmap or rocksdb");
        }
        TraceSource.listSplits(input); // fails early on a directory that is not a trace

        Map<String, String> conf = new HashMap<>();
        conf.put("execution.checkpointing.interval", interval + " ms");
        conf.put("execution.checkpointing.dir", new File(ckptDir).getAbsoluteFile().toURI().toString());
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
        // Every type on the wire has a Flink serializer; none falls back to Kryo.
        conf.put("pipeline.generic-types", "false");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(Configuration.fromMap(conf));
        env.setParallelism(parallelism);
        build(env, input, output, maxDrift, alignInterval);
        JobExecutionResult r = env.execute("gatewaymeter");
        System.out.println("flink: job " + r.getJobID() + " finished in " + r.getNetRuntime() + " ms");
    }

    /**
     * Adds the job to env: the trace in input, the outputs under output; with maxDriftMs &gt; 0,
     * the source's watermarks aligned within maxDriftMs, updated every alignIntervalMs.
     */
    static void build(StreamExecutionEnvironment env, String input, String output, long maxDriftMs, long alignIntervalMs) {
        WatermarkStrategy<Event> wm = WatermarkStrategy.<Event>forBoundedOutOfOrderness(Duration.ofMillis(OUT_OF_ORDERNESS))
                .withTimestampAssigner((e, t) -> e.kind == Event.BAD ? Long.MIN_VALUE : e.ts);
        if (maxDriftMs > 0) {
            wm = wm.withWatermarkAlignment(ALIGNMENT_GROUP, Duration.ofMillis(maxDriftMs), Duration.ofMillis(alignIntervalMs));
        }
        DataStream<Event> lines = env.fromSource(new TraceSource(input), wm, "gateway-events").uid("gateway-events");

        OutputTag<Event> deadTag = new OutputTag<>("dead-letters", TypeInformation.of(Event.class));
        SingleOutputStreamOperator<Event> events = lines.process(new ProcessFunction<Event, Event>() {
            @Override
            public void processElement(Event e, Context ctx, Collector<Event> out) {
                if (e.kind == Event.BAD) {
                    ctx.output(deadTag, e);
                } else {
                    out.collect(e);
                }
            }
        }).uid("parse").name("parse");
        events.getSideOutput(deadTag).sinkTo(sink(output, "dead-letters", Records::json)).uid("dead-letters-sink").setParallelism(1);

        OutputTag<Orphan> orphanTag = new OutputTag<>("orphans", TypeInformation.of(Orphan.class));
        SingleOutputStreamOperator<RequestRecord> requests =
                events.keyBy(e -> e.requestId).process(new Assemble(orphanTag)).uid("assemble").name("assemble");
        requests.getSideOutput(orphanTag).sinkTo(sink(output, "orphans", Records::json)).uid("orphans-sink").setParallelism(1);

        SingleOutputStreamOperator<TenantCostMinute> costs = requests.keyBy(r -> r.tenantId)
                .window(new EndTimeMinutes())
                .aggregate(new CostAgg(), new CostWindow())
                .uid("tenant-cost").name("tenant-cost");
        costs.sinkTo(sink(output, "tenant-cost", Records::json)).uid("tenant-cost-sink");

        costs.keyBy(m -> m.tenantId).process(new Alerter()).uid("alerts").name("alerts")
                .sinkTo(sink(output, "alerts", Records::json)).uid("alerts-sink");

        requests.map(r -> {
                    LatencySample s = new LatencySample();
                    s.model = r.model;
                    s.endTs = r.endTs;
                    s.latencyMs = r.latencyMs;
                    return s;
                }).name("latency-sample")
                .keyBy(s -> s.model)
                .window(new EndTimeMinutes())
                .process(new LatencyWindow())
                .uid("model-latency").name("model-latency")
                .sinkTo(sink(output, "model-latency", Records::json)).uid("model-latency-sink");
    }

    /** How a record becomes one JSON line. */
    interface Json<T> extends java.io.Serializable {
        byte[] line(T t);
    }

    /** A file sink writing JSON lines into OUTPUT/name/, a new file per checkpoint. */
    static <T> FileSink<T> sink(String output, String name, Json<T> json) {
        Encoder<T> enc = (t, out) -> out.write(json.line(t));
        return FileSink.forRowFormat(new Path(new File(output, name).getAbsolutePath()), enc)
                .withBucketAssigner(new BasePathBucketAssigner<>())
                .withRollingPolicy(OnCheckpointRollingPolicy.build())
                .withOutputFileConfig(OutputFileConfig.builder().withPartPrefix("part").withPartSuffix(".jsonl").build())
                .build();
    }

    /**
     * Holds the first event of a request until its partner comes, then emits the joined record;
     * an event without a partner ORPHAN_TIMEOUT after it becomes an orphan (an event-time timer).
     */
    static final class Assemble extends KeyedProcessFunction<String, Event, RequestRecord> {
        private final OutputTag<Orphan> orphans;
        private transient ValueState<Event> first;

        Assemble(OutputTag<Orphan> orphans) {
            this.orphans = orphans;
        }

        @Override
        public void open(org.apache.flink.api.common.functions.OpenContext ctx) {
            first = getRuntimeContext().getState(new ValueStateDescriptor<>("first", Event.class));
        }

        @Override
        public void processElement(Event e, Context ctx, Collector<RequestRecord> out) throws Exception {
            Event f = first.value();
            if (f == null || f.kind == e.kind) {
                first.update(e);
                ctx.timerService().registerEventTimeTimer(e.ts + ORPHAN_TIMEOUT);
                return;
            }
            RequestRecord r = RequestRecord.join(f, e);
            first.clear();
            ctx.timerService().deleteEventTimeTimer(f.ts + ORPHAN_TIMEOUT);
            out.collect(r);
        }

        @Override
        public void onTimer(long t, OnTimerContext ctx, Collector<RequestRecord> out) throws Exception {
            Event f = first.value();
            if (f == null || f.ts + ORPHAN_TIMEOUT != t) {
                return;
            }
            first.clear();
            ctx.output(orphans, f.toOrphan());
        }
    }

    /**
     * Tumbling one-minute event-time windows on a record's end time (a request's event time is
     * its response's ts, which the assemble operator cannot set as the record's timestamp when
     * the response came first), aligned to the epoch.
     */
    static final class EndTimeMinutes extends WindowAssigner<Object, TimeWindow> {
        private static final long serialVersionUID = 1L;

        @Override
        public Collection<TimeWindow> assignWindows(Object element, long timestamp, WindowAssignerContext ctx) {
            long end = element instanceof RequestRecord ? ((RequestRecord) element).endTs : ((LatencySample) element).endTs;
            long start = end - Math.floorMod(end, WINDOW);
            return Collections.singletonList(new TimeWindow(start, start + WINDOW));
        }

        @Override
        public Trigger<Object, TimeWindow> getDefaultTrigger() {
            return EventTimeTrigger.create();
        }

        @Override
        public TypeSerializer<TimeWindow> getWindowSerializer(ExecutionConfig config) {
            return new TimeWindow.Serializer();
        }

        @Override
        public boolean isEventTime() {
            return true;
        }
    }

    /** The accumulator of tenant-cost. */
    public static class CostAcc {
        public long cost;
        public long requests;

        public CostAcc() {}
    }

    static final class CostAgg implements AggregateFunction<RequestRecord, CostAcc, CostAcc> {
        @Override
        public CostAcc createAccumulator() {
            return new CostAcc();
        }

        @Override
        public CostAcc add(RequestRecord r, CostAcc a) {
            a.cost += r.costMicros;
            a.requests++;
            return a;
        }

        @Override
        public CostAcc getResult(CostAcc a) {
            return a;
        }

        @Override
        public CostAcc merge(CostAcc a, CostAcc b) {
            a.cost += b.cost;
            a.requests += b.requests;
            return a;
        }
    }

    static final class CostWindow extends ProcessWindowFunction<CostAcc, TenantCostMinute, String, TimeWindow> {
        @Override
        public void process(String tenant, Context ctx, Iterable<CostAcc> accs, Collector<TenantCostMinute> out) {
            CostAcc a = accs.iterator().next();
            TenantCostMinute m = new TenantCostMinute();
            m.tenantId = tenant;
            m.windowStart = ctx.window().getStart();
            m.windowEnd = ctx.window().getEnd();
            m.costMicros = a.cost;
            m.requests = a.requests;
            out.collect(m);
        }
    }

    /** model-latency: exact nearest-rank percentiles over the window's latencies. */
    static final class LatencyWindow extends ProcessWindowFunction<LatencySample, ModelLatencyMinute, String, TimeWindow> {
        @Override
        public void process(String model, Context ctx, Iterable<LatencySample> samples, Collector<ModelLatencyMinute> out) {
            long[] lat = new long[64];
            int n = 0;
            for (LatencySample s : samples) {
                if (n == lat.length) {
                    lat = Arrays.copyOf(lat, n * 2);
                }
                lat[n++] = s.latencyMs;
            }
            ModelLatencyMinute m = new ModelLatencyMinute();
            m.model = model;
            m.windowStart = ctx.window().getStart();
            m.windowEnd = ctx.window().getEnd();
            m.requests = n;
            if (n > 0) {
                // By selection, as weir's job does (model.go, NewModelLatencyMinute).
                int k99 = Records.rank(n, 99), k95 = Records.rank(n, 95), k50 = Records.rank(n, 50);
                Records.selectRank(lat, 0, n - 1, k99);
                Records.selectRank(lat, 0, k99, k95);
                Records.selectRank(lat, 0, k95, k50);
                m.p50Ms = lat[k50];
                m.p95Ms = lat[k95];
                m.p99Ms = lat[k99];
                long max = lat[k99];
                for (int i = k99 + 1; i < n; i++) {
                    max = Math.max(max, lat[i]);
                }
                m.maxMs = max;
            }
            out.collect(m);
        }
    }

    /**
     * alerts: remembers a tenant's last up-to-5 minute costs; fires when at least 3 are
     * remembered and this minute's cost × k &gt; 3 × their sum (baseline sum / k).
     */
    static final class Alerter extends KeyedProcessFunction<String, TenantCostMinute, Alert> {
        private transient ValueState<long[]> history;

        @Override
        public void open(org.apache.flink.api.common.functions.OpenContext ctx) {
            history = getRuntimeContext().getState(new ValueStateDescriptor<>("history", long[].class));
        }

        @Override
        public void processElement(TenantCostMinute m, Context ctx, Collector<Alert> out) throws Exception {
            long[] h = history.value();
            if (h == null) {
                h = new long[0];
            }
            long sum = 0;
            for (long c : h) {
                sum += c;
            }
            int k = h.length;
            if (k >= 3 && m.costMicros * k > 3 * sum) {
                Alert a = new Alert();
                a.tenantId = m.tenantId;
                a.windowEnd = m.windowEnd;
                a.costMicros = m.costMicros;
                a.baselineMicros = sum / k;
                out.collect(a);
            }
            long[] next;
            if (k == 5) {
                next = Arrays.copyOfRange(h, 1, 6);
            } else {
                next = Arrays.copyOf(h, k + 1);
            }
            next[next.length - 1] = m.costMicros;
            history.update(next);
        }
    }

    private static Map<String, String> flags(String[] args) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String k = args[i];
            if (!k.startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("want --flag value pairs, got " + k);
            }
            String name = k.substring(2);
            switch (name) {
                case "input":
                case "output":
                case "checkpoint-dir":
                case "backend":
                case "parallelism":
                case "checkpoint-interval-ms":
                case "rest-port":
                case "managed-memory":
                case "alignment-max-drift-ms":
                case "alignment-update-interval-ms":
                    m.put(name, args[++i]);
                    break;
                default:
                    throw new IllegalArgumentException("unknown flag " + k
                            + " (known: --input --output --checkpoint-dir --backend --parallelism --checkpoint-interval-ms --rest-port --managed-memory"
                            + " --alignment-max-drift-ms --alignment-update-interval-ms)");
            }
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
