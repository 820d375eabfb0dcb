package org.weirstream.flinkbench;

import java.io.IOException;
import java.util.Set;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.sink.DynamicTableSink;
import org.apache.flink.table.connector.sink.SinkV2Provider;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.factories.DynamicTableSinkFactory;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.LogicalTypeRoot;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.utils.LogicalTypeChecks;
import org.apache.flink.types.RowKind;

/**
 * The table connector {@code weir-latency}: a sink that counts each row's end-to-end latency
 * (see {@link Latency}) and writes the histogram when it closes. A row is due at the time in
 * its column {@code column}, rounded up to a multiple of {@code round-ms}, plus {@code
 * offset-ms} (weir's nexmark.LatencySpec); rows due outside [{@code count-from}, {@code
 * count-until}) and retractions are not counted.
 */
public final class LatencySink implements DynamicTableSink {
    static final ConfigOption<String> DIR = ConfigOptions.key("latency-dir").stringType().noDefaultValue();
    static final ConfigOption<Long> BASE = ConfigOptions.key("base-time").longType().noDefaultValue();
    static final ConfigOption<String> COLUMN = ConfigOptions.key("column").stringType().noDefaultValue();
    static final ConfigOption<Long> ROUND = ConfigOptions.key("round-ms").longType().defaultValue(1L);
    static final ConfigOption<Long> OFFSET = ConfigOptions.key("offset-ms").longType().defaultValue(0L);
    static final ConfigOption<Long> FROM = ConfigOptions.key("count-from").longType().noDefaultValue();
    static final ConfigOption<Long> UNTIL = ConfigOptions.key("count-until").longType().noDefaultValue();

    private final Spec spec;

    LatencySink(Spec spec) {
        this.spec = spec;
    }

    /** What a writer needs: serializable. */
    static final class Spec implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        String dir;
        long base, round, offset, from, until;
        int column, precision;
    }

    @Override
    public ChangelogMode getChangelogMode(ChangelogMode requested) {
        return requested;
    }

    @Override
    public SinkRuntimeProvider getSinkRuntimeProvider(Context context) {
        return SinkV2Provider.of(new LatencyCounter(spec));
    }

    @Override
    public DynamicTableSink copy() {
        return new LatencySink(spec);
    }

    @Override
    public String asSummaryString() {
        return "weir-latency";
    }

    /** Creates the sink from the table's options. */
    public static final class Factory implements DynamicTableSinkFactory {
        @Override
        public String factoryIdentifier() {
            return "weir-latency";
        }

        @Override
        public Set<ConfigOption<?>> requiredOptions() {
            return Set.of(DIR, BASE, COLUMN, FROM, UNTIL);
        }

        @Override
        public Set<ConfigOption<?>> optionalOptions() {
            return Set.of(ROUND, OFFSET);
        }

        @Override
        public DynamicTableSink createDynamicTableSink(Context context) {
            FactoryUtil.TableFactoryHelper helper = FactoryUtil.createTableFactoryHelper(this, context);
            helper.validate();
            ReadableConfig o = helper.getOptions();
            RowType row = (RowType) context.getPhysicalRowDataType().getLogicalType();
            Spec s = new Spec();
            s.dir = o.get(DIR);
            s.base = o.get(BASE);
            s.round = Math.max(o.get(ROUND), 1);
            s.offset = o.get(OFFSET);
            s.from = o.get(FROM);
            s.until = o.get(UNTIL);
            s.column = row.getFieldIndex(o.get(COLUMN));
            if (s.column < 0) {
                throw new IllegalArgumentException("column " + o.get(COLUMN) + ": not a column of " + row);
            }
            LogicalType t = row.getTypeAt(s.column);
            if (t.getTypeRoot() != LogicalTypeRoot.TIMESTAMP_WITHOUT_TIME_ZONE) {
                throw new IllegalArgumentException("column " + o.get(COLUMN) + " is " + t + ", not a TIMESTAMP");
            }
            s.precision = LogicalTypeChecks.getPrecision(t);
            return new LatencySink(s);
        }
    }

    static final class LatencyCounter implements Sink<RowData> {
        private static final long serialVersionUID = 1L;
        private final Spec spec;

        LatencyCounter(Spec spec) {
            this.spec = spec;
        }

        @Override
        public SinkWriter<RowData> createWriter(WriterInitContext context) {
            return new Writer(spec, context.getTaskInfo().getIndexOfThisSubtask());
        }
    }

    static final class Writer implements SinkWriter<RowData> {
        private final Spec spec;
        private final int subtask;
        private final long[] counts = new long[Latency.BUCKETS];
        private long shift;
        private boolean shifted;

        Writer(Spec spec, int subtask) {
            this.spec = spec;
            this.subtask = subtask;
        }

        @Override
        public void write(RowData row, Context context) throws IOException {
            long now = Latency.nowMicros();
            RowKind k = row.getRowKind();
            if ((k != RowKind.INSERT && k != RowKind.UPDATE_AFTER) || row.isNullAt(spec.column)) {
                return;
            }
            long t = row.getTimestamp(spec.column, spec.precision).getMillisecond();
            long due = t + Math.floorMod(-t, spec.round) + spec.offset;
            if (due < spec.from || due >= spec.until) {
                return;
            }
            if (!shifted) {
                // The start file exists: a reader wrote it before it released this row's events.
                shift = Latency.shift(spec.dir, spec.base);
                shifted = true;
            }
            counts[Latency.bucket(Math.max(now - (due + shift) * 1000, 0))]++;
        }

        @Override
        public void flush(boolean endOfInput) {}

        @Override
        public void close() throws IOException {
            Latency.write(spec.dir, subtask, counts);
        }
    }
}
