package org.weirstream.flinkbench;

import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.flink.api.common.serialization.DeserializationSchema;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.source.reader.RecordsBySplits;
import org.apache.flink.connector.base.source.reader.RecordsWithSplitIds;
import org.apache.flink.connector.base.source.reader.SingleThreadMultiplexSourceReaderBase;
import org.apache.flink.connector.base.source.reader.splitreader.SplitReader;
import org.apache.flink.connector.base.source.reader.splitreader.SplitsAddition;
import org.apache.flink.connector.base.source.reader.splitreader.SplitsChange;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.format.DecodingFormat;
import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.connector.source.ScanTableSource;
import org.apache.flink.table.connector.source.SourceProvider;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.factories.DeserializationFormatFactory;
import org.apache.flink.table.factories.DynamicTableSourceFactory;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.types.DataType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.util.UserCodeClassLoader;

/**
 * The table connector {@code weir-paced}: the Nexmark events of a directory of JSON-lines
 * files (one per split, as weir's generator writes them), decoded by the table's format (the
 * same {@code json} format as the filesystem connector's), each released no earlier than its
 * event time plus the run's shift of wall-clock time ({@link Latency}): a source at the rate the
 * events were generated for. One split per file, split i read by reader i mod parallelism; a
 * reader releases, of its splits, the events due first.
 */
public final class PacedSource implements ScanTableSource {
    static final ConfigOption<String> PATH = ConfigOptions.key("path").stringType().noDefaultValue();

    private final String path, latencyDir;
    private final long base;
    private final DecodingFormat<DeserializationSchema<RowData>> format;
    private final DataType physical;

    PacedSource(String path, String latencyDir, long base, DecodingFormat<DeserializationSchema<RowData>> format, DataType physical) {
        this.path = path;
        this.latencyDir = latencyDir;
        this.base = base;
        this.format = format;
        this.physical = physical;
    }

    @Override
    public ChangelogMode getChangelogMode() {
        return ChangelogMode.insertOnly();
    }

    @Override
    public ScanRuntimeProvider getScanRuntimeProvider(ScanContext context) {
        DeserializationSchema<RowData> decoder = format.createRuntimeDecoder(context, physical);
        return SourceProvider.of(new Paced(path, latencyDir, base, decoder, new EventTime((RowType) physical.getLogicalType())));
    }

    @Override
    public DynamicTableSource copy() {
        return new PacedSource(path, latencyDir, base, format, physical);
    }

    @Override
    public String asSummaryString() {
        return "weir-paced";
    }

    /** Creates the source from the table's options. */
    public static final class Factory implements DynamicTableSourceFactory {
        @Override
        public String factoryIdentifier() {
            return "weir-paced";
        }

        @Override
        public Set<ConfigOption<?>> requiredOptions() {
            return Set.of(PATH, LatencySink.DIR, LatencySink.BASE, FactoryUtil.FORMAT);
        }

        @Override
        public Set<ConfigOption<?>> optionalOptions() {
            return Set.of();
        }

        @Override
        public DynamicTableSource createDynamicTableSource(Context context) {
            FactoryUtil.TableFactoryHelper helper = FactoryUtil.createTableFactoryHelper(this, context);
            DecodingFormat<DeserializationSchema<RowData>> format =
                    helper.discoverDecodingFormat(DeserializationFormatFactory.class, FactoryUtil.FORMAT);
            helper.validate();
            return new PacedSource(helper.getOptions().get(PATH), helper.getOptions().get(LatencySink.DIR),
                    helper.getOptions().get(LatencySink.BASE), format, context.getPhysicalRowDataType());
        }
    }

    /** The event time of a row of nexmark_events: its person's, auction's or bid's dateTime. */
    static final class EventTime implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        private final int type;
        private final int[] field = new int[3], arity = new int[3], time = new int[3];

        EventTime(RowType row) {
            type = row.getFieldIndex("event_type");
            String[] names = {"person", "auction", "bid"};
            for (int i = 0; i < 3; i++) {
                field[i] = row.getFieldIndex(names[i]);
                if (type < 0 || field[i] < 0) {
                    throw new IllegalArgumentException("not the nexmark_events row: " + row);
                }
                RowType nested = (RowType) row.getTypeAt(field[i]);
                arity[i] = nested.getFieldCount();
                time[i] = nested.getFieldIndex("dateTime");
            }
        }

        long of(RowData r) {
            int t = r.getInt(type);
            return r.getRow(field[t], arity[t]).getTimestamp(time[t], 3).getMillisecond();
        }
    }

    /** A line decoded: the row, its event time and the byte offset of the next line. */
    static final class Line {
        RowData row;
        long time, nextOffset;
    }

    static final class Paced implements Source<RowData, TraceSource.Split, List<TraceSource.Split>> {
        private static final long serialVersionUID = 1L;
        private final String dir, latencyDir;
        private final long base;
        private final DeserializationSchema<RowData> decoder;
        private final EventTime eventTime;

        Paced(String dir, String latencyDir, long base, DeserializationSchema<RowData> decoder, EventTime eventTime) {
            this.dir = dir;
            this.latencyDir = latencyDir;
            this.base = base;
            this.decoder = decoder;
            this.eventTime = eventTime;
        }

        @Override
        public Boundedness getBoundedness() {
            return Boundedness.BOUNDED;
        }

        @Override
        public SplitEnumerator<TraceSource.Split, List<TraceSource.Split>> createEnumerator(SplitEnumeratorContext<TraceSource.Split> ctx)
                throws Exception {
            return new TraceSource.Enumerator(ctx, TraceSource.listSplits(dir));
        }

        @Override
        public SplitEnumerator<TraceSource.Split, List<TraceSource.Split>> restoreEnumerator(
                SplitEnumeratorContext<TraceSource.Split> ctx, List<TraceSource.Split> pending) {
            return new TraceSource.Enumerator(ctx, pending);
        }

        @Override
        public SimpleVersionedSerializer<TraceSource.Split> getSplitSerializer() {
            return new TraceSource.SplitSerializer();
        }

        @Override
        public SimpleVersionedSerializer<List<TraceSource.Split>> getEnumeratorCheckpointSerializer() {
            return new TraceSource.PendingSerializer();
        }

        @Override
        public SourceReader<RowData, TraceSource.Split> createReader(SourceReaderContext ctx) throws Exception {
            decoder.open(new DeserializationSchema.InitializationContext() {
                @Override
                public MetricGroup getMetricGroup() {
                    return ctx.metricGroup();
                }

                @Override
                public UserCodeClassLoader getUserCodeClassLoader() {
                    return ctx.getUserCodeClassLoader();
                }
            });
            return new Reader(ctx, () -> new LineReader(this));
        }
    }

    static final class Reader extends SingleThreadMultiplexSourceReaderBase<Line, RowData, TraceSource.Split, TraceSource.Split> {
        Reader(SourceReaderContext ctx, java.util.function.Supplier<SplitReader<Line, TraceSource.Split>> readers) {
            super(readers, Reader::emit, new Configuration(), ctx);
        }

        private static void emit(Line l, SourceOutput<RowData> out, TraceSource.Split state) {
            state.offset = l.nextOffset;
            out.collect(l.row);
        }

        @Override
        protected void onSplitFinished(Map<String, TraceSource.Split> finished) {}

        @Override
        protected TraceSource.Split initializedState(TraceSource.Split split) {
            return split.copy();
        }

        @Override
        protected TraceSource.Split toSplitType(String id, TraceSource.Split state) {
            return state.copy();
        }
    }

    /** An open split and its next line, decoded. */
    private static final class Open {
        final TraceSource.Split split;
        final RandomAccessFile file;
        byte[] buf = new byte[1 << 16];
        int pos, len;
        long base; // the file offset of buf[0]
        boolean eof;
        Line next;

        Open(TraceSource.Split split) throws IOException {
            this.split = split;
            this.file = new RandomAccessFile(split.path, "r");
            file.seek(split.offset);
            base = split.offset;
        }

        /** The next line's bytes, or null at the end of the file. */
        byte[] line() throws IOException {
            while (true) {
                for (int k = pos; k < len; k++) {
                    if (buf[k] == '\n') {
                        byte[] l = Arrays.copyOfRange(buf, pos, k);
                        pos = k + 1;
                        return l;
                    }
                }
                if (eof) {
                    if (pos == len) {
                        return null;
                    }
                    byte[] l = Arrays.copyOfRange(buf, pos, len); // a last line without a newline
                    pos = len;
                    return l;
                }
                if (pos > 0) {
                    System.arraycopy(buf, pos, buf, 0, len - pos);
                    base += pos;
                    len -= pos;
                    pos = 0;
                }
                if (len == buf.length) {
                    buf = Arrays.copyOf(buf, buf.length * 2);
                }
                int n = file.read(buf, len, buf.length - len);
                if (n < 0) {
                    eof = true;
                } else {
                    len += n;
                }
            }
        }
    }

    /** Releases the lines of its splits that are due, the one due first first. */
    static final class LineReader implements SplitReader<Line, TraceSource.Split> {
        /** The longest the fetcher sleeps before it returns, so that it can be woken. */
        private static final long MAX_SLEEP_MS = 50;

        private final Paced src;
        private final List<Open> open = new ArrayList<>();
        private long shift;
        private boolean shifted;

        LineReader(Paced src) {
            this.src = src;
        }

        /** Decodes s's next line into s.next, null at the end of its file; skips blank lines. */
        private void advance(Open s) throws IOException {
            while (true) {
                byte[] b = s.line();
                if (b == null) {
                    s.next = null;
                    return;
                }
                RowData row = src.decoder.deserialize(b);
                if (row == null) {
                    continue;
                }
                Line l = new Line();
                l.row = row;
                l.time = src.eventTime.of(row);
                l.nextOffset = s.base + s.pos;
                s.next = l;
                return;
            }
        }

        @Override
        public RecordsWithSplitIds<Line> fetch() throws IOException {
            RecordsBySplits.Builder<Line> out = new RecordsBySplits.Builder<>();
            if (!shifted) {
                shift = Latency.shift(src.latencyDir, src.base);
                shifted = true;
            }
            Open first = null;
            for (Open s : new ArrayList<>(open)) {
                if (s.next == null) {
                    out.addFinishedSplit(s.split.id);
                    s.file.close();
                    open.remove(s);
                } else if (first == null || s.next.time < first.next.time) {
                    first = s;
                }
            }
            if (first == null) {
                return out.build();
            }
            long wait = first.next.time + shift - System.currentTimeMillis();
            if (wait > 0) {
                try {
                    Thread.sleep(Math.min(wait, MAX_SLEEP_MS));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted", e);
                }
                if (wait > MAX_SLEEP_MS) {
                    return out.build();
                }
            }
            long now = System.currentTimeMillis();
            for (int n = 0; n < TraceSource.BATCH && first.next != null && first.next.time + shift <= now; n++) {
                out.add(first.split.id, first.next);
                advance(first);
            }
            return out.build();
        }

        @Override
        public void handleSplitsChanges(SplitsChange<TraceSource.Split> change) {
            if (!(change instanceof SplitsAddition)) {
                throw new UnsupportedOperationException("split change " + change);
            }
            for (TraceSource.Split s : change.splits()) {
                try {
                    Open o = new Open(s);
                    advance(o);
                    open.add(o);
                } catch (IOException e) {
                    throw new RuntimeException("opening split " + s.id + ": " + e, e);
                }
            }
        }

        @Override
        public void wakeUp() {}

        @Override
        public void close() throws IOException {
            for (Open s : open) {
                s.file.close();
            }
        }
    }
}
