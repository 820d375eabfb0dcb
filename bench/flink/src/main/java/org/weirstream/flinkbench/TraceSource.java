package org.weirstream.flinkbench;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.source.reader.RecordsBySplits;
import org.apache.flink.connector.base.source.reader.RecordsWithSplitIds;
import org.apache.flink.connector.base.source.reader.SingleThreadMultiplexSourceReaderBase;
import org.apache.flink.connector.base.source.reader.splitreader.SplitReader;
import org.apache.flink.connector.base.source.reader.splitreader.SplitsAddition;
import org.apache.flink.connector.base.source.reader.splitreader.SplitsChange;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * Reads a trace written by {@code weir gen gatewaymeter}: one split per partition file
 * (part-NNNNN.jsonl), split i assigned to reader i mod parallelism up front, as weir's file
 * source does. Each reader reads its splits in turn, a batch of lines from each, and emits
 * through one output per split, so every partition has its own watermark (Flink's per-split
 * watermarks) and the slowest partition holds the reader's watermark back. With watermark
 * alignment (GatewayMeter's --alignment-max-drift-ms), Flink pauses a split whose watermark is
 * past the group's maximal watermark and the reader skips it until it is resumed
 * (LineReader.pauseOrResumeSplits). A split's position is the byte offset of its next line,
 * checkpointed with the reader. Lines are parsed where they are read (EventParser), into events
 * or dead letters.
 */
public final class TraceSource implements Source<Event, TraceSource.Split, List<TraceSource.Split>> {
    private static final long serialVersionUID = 1L;
    /** Lines read from one split before the reader turns to the next. */
    static final int BATCH = 1024;

    private final String dir;

    public TraceSource(String dir) {
        this.dir = dir;
    }

    @Override
    public Boundedness getBoundedness() {
        return Boundedness.BOUNDED;
    }

    /** The trace's partition files, in partition order. */
    static List<Split> listSplits(String dir) throws IOException {
        File[] files = new File(dir).listFiles((d, name) -> name.startsWith("part-") && name.endsWith(".jsonl"));
        if (files == null || files.length == 0) {
            throw new IOException(dir + " holds no part-*.jsonl: not a trace written by weir gen gatewaymeter");
        }
        Arrays.sort(files);
        List<Split> splits = new ArrayList<>();
        for (File f : files) {
            splits.add(new Split(f.getName(), f.getAbsolutePath(), 0));
        }
        return splits;
    }

    @Override
    public SplitEnumerator<Split, List<Split>> createEnumerator(SplitEnumeratorContext<Split> ctx) throws Exception {
        return new Enumerator(ctx, listSplits(dir));
    }

    @Override
    public SplitEnumerator<Split, List<Split>> restoreEnumerator(SplitEnumeratorContext<Split> ctx, List<Split> pending) {
        return new Enumerator(ctx, pending);
    }

    @Override
    public SimpleVersionedSerializer<Split> getSplitSerializer() {
        return new SplitSerializer();
    }

    @Override
    public SimpleVersionedSerializer<List<Split>> getEnumeratorCheckpointSerializer() {
        return new PendingSerializer();
    }

    @Override
    public SourceReader<Event, Split> createReader(SourceReaderContext ctx) {
        return new Reader(ctx);
    }

    /** A partition file and the byte offset of its next line. */
    public static final class Split implements SourceSplit {
        final String id;
        final String path;
        final int partition;
        long offset;

        Split(String id, String path, long offset) {
            this.id = id;
            this.path = path;
            this.offset = offset;
            String n = id.substring("part-".length(), id.length() - ".jsonl".length());
            this.partition = Integer.parseInt(n);
        }

        @Override
        public String splitId() {
            return id;
        }

        Split copy() {
            return new Split(id, path, offset);
        }
    }

    /** Hands each reader its splits, partition mod parallelism, once it registers. */
    static final class Enumerator implements SplitEnumerator<Split, List<Split>> {
        private final SplitEnumeratorContext<Split> ctx;
        private final Map<Integer, List<Split>> pending = new HashMap<>();

        Enumerator(SplitEnumeratorContext<Split> ctx, List<Split> splits) {
            this.ctx = ctx;
            for (Split s : splits) {
                pending.computeIfAbsent(s.partition % ctx.currentParallelism(), k -> new ArrayList<>()).add(s);
            }
        }

        @Override
        public void start() {}

        @Override
        public void handleSplitRequest(int subtask, String host) {}

        @Override
        public void addSplitsBack(List<Split> splits, int subtask) {
            pending.computeIfAbsent(subtask, k -> new ArrayList<>()).addAll(splits);
        }

        @Override
        public void addReader(int subtask) {
            List<Split> mine = pending.remove(subtask);
            if (mine != null) {
                for (Split s : mine) {
                    ctx.assignSplit(s, subtask);
                }
            }
            ctx.signalNoMoreSplits(subtask);
        }

        @Override
        public List<Split> snapshotState(long checkpointId) {
            List<Split> all = new ArrayList<>();
            pending.values().forEach(all::addAll);
            return all;
        }

        @Override
        public void close() {}
    }

    /** A reader of one subtask: one fetcher thread reading its splits in turn. */
    static final class Reader extends SingleThreadMultiplexSourceReaderBase<Event, Event, Split, Split> {
        Reader(SourceReaderContext ctx) {
            super(LineReader::new, Reader::emit, new Configuration(), ctx);
        }

        private static void emit(Event e, SourceOutput<Event> out, Split state) {
            state.offset = e.nextOffset;
            out.collect(e);
        }

        @Override
        protected void onSplitFinished(Map<String, Split> finished) {}

        @Override
        protected Split initializedState(Split split) {
            return split.copy();
        }

        @Override
        protected Split toSplitType(String id, Split state) {
            return state.copy();
        }
    }

    /** An open split: the file and a buffer of bytes read from it. */
    private static final class Open {
        final Split split;
        final RandomAccessFile file;
        byte[] buf = new byte[1 << 20];
        int pos, len;
        /** The file offset of buf[0]. */
        long base;
        boolean eof;

        Open(Split split) throws IOException {
            this.split = split;
            this.file = new RandomAccessFile(split.path, "r");
            file.seek(split.offset);
            base = split.offset;
        }

        /** The index of the next newline in buf, or -1. */
        int newline() {
            for (int k = pos; k < len; k++) {
                if (buf[k] == '\n') {
                    return k;
                }
            }
            return -1;
        }

        /** Makes room and reads more; false at the end of the file. */
        boolean fill() throws IOException {
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
                return false;
            }
            len += n;
            return true;
        }
    }

    /**
     * Reads a batch of lines from one split per fetch, turning from split to split. A split that
     * watermark alignment pauses (pauseOrResumeSplits, called in the fetcher thread like fetch) is
     * set aside, not read, until it is resumed; fetch reads the next split that is not paused.
     * When every open split is paused, fetch waits, without spinning, until wakeUp: the split
     * fetcher wakes the running fetch whenever it has a task for the reader (a pause or resume, new
     * splits, shut-down), as the Kafka source's fetch waits in a consumer's poll with every
     * partition paused until the consumer's wakeup. The wait is also bounded (PAUSED_WAIT), so that
     * a lost wake-up would cost a pause, never a hang.
     */
    static final class LineReader implements SplitReader<Event, Split> {
        /** The longest fetch waits with every split paused before it returns no records. */
        static final long PAUSED_WAIT_MS = 100;

        /** The open splits not paused, in the order they are read. */
        private final ArrayDeque<Open> open = new ArrayDeque<>();
        /** The open splits paused, by id. */
        private final Map<String, Open> paused = new HashMap<>();
        private final EventParser parser = new EventParser();
        /** Set by wakeUp (any thread), cleared when a waiting fetch returns because of it. */
        private final Object wake = new Object();
        private boolean wakeup;

        @Override
        public RecordsWithSplitIds<Event> fetch() throws IOException {
            RecordsBySplits.Builder<Event> out = new RecordsBySplits.Builder<>();
            Open s = open.poll();
            if (s == null) {
                if (!paused.isEmpty()) {
                    awaitWakeUp();
                }
                return out.build();
            }
            for (int n = 0; n < BATCH; n++) {
                int nl = s.newline();
                while (nl < 0 && !s.eof) {
                    s.fill();
                    nl = s.newline();
                }
                if (nl < 0) {
                    if (s.pos == s.len) {
                        break;
                    }
                    nl = s.len; // a last line without a newline
                }
                Event e = new Event();
                parser.parse(s.buf, s.pos, nl, e, s.split.partition, s.base + s.pos);
                s.pos = Math.min(nl + 1, s.len);
                e.nextOffset = s.base + s.pos;
                out.add(s.split.id, e);
            }
            if (s.eof && s.pos == s.len) {
                out.addFinishedSplit(s.split.id);
                s.file.close();
            } else {
                open.add(s);
            }
            return out.build();
        }

        /**
         * Waits until wakeUp has been called (since the last wait it ended) or PAUSED_WAIT_MS
         * passed. A wakeUp that comes before the wait begins is not lost: its flag ends the wait
         * at once.
         */
        private void awaitWakeUp() throws IOException {
            synchronized (wake) {
                long deadline = System.nanoTime() + PAUSED_WAIT_MS * 1_000_000L;
                try {
                    while (!wakeup) {
                        long left = deadline - System.nanoTime();
                        if (left <= 0) {
                            break;
                        }
                        wake.wait(Math.max(1, left / 1_000_000L));
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted waiting for paused splits", e);
                }
                wakeup = false;
            }
        }

        @Override
        public void handleSplitsChanges(SplitsChange<Split> change) {
            if (!(change instanceof SplitsAddition)) {
                throw new UnsupportedOperationException("split change " + change);
            }
            for (Split s : change.splits()) {
                try {
                    open.add(new Open(s));
                } catch (IOException e) {
                    throw new RuntimeException("opening split " + s.id + ": " + e, e);
                }
            }
        }

        /**
         * Watermark alignment: sets the splits to pause aside and puts the ones to resume back in
         * turn. A split this reader no longer holds (finished) or that is already in the state
         * asked for is left alone.
         */
        @Override
        public void pauseOrResumeSplits(Collection<Split> splitsToPause, Collection<Split> splitsToResume) {
            for (Split s : splitsToPause) {
                for (Iterator<Open> it = open.iterator(); it.hasNext(); ) {
                    Open o = it.next();
                    if (o.split.id.equals(s.id)) {
                        it.remove();
                        paused.put(o.split.id, o);
                        break;
                    }
                }
            }
            for (Split s : splitsToResume) {
                Open o = paused.remove(s.id);
                if (o != null) {
                    open.add(o);
                }
            }
        }

        @Override
        public void wakeUp() {
            synchronized (wake) {
                wakeup = true;
                wake.notifyAll();
            }
        }

        @Override
        public void close() throws IOException {
            for (Open s : open) {
                s.file.close();
            }
            for (Open s : paused.values()) {
                s.file.close();
            }
        }
    }

    static final class SplitSerializer implements SimpleVersionedSerializer<Split> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Split s) throws IOException {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            DataOutputStream out = new DataOutputStream(b);
            out.writeUTF(s.id);
            out.writeUTF(s.path);
            out.writeLong(s.offset);
            out.flush();
            return b.toByteArray();
        }

        @Override
        public Split deserialize(int version, byte[] data) throws IOException {
            DataInputStream in = new DataInputStream(new ByteArrayInputStream(data));
            return new Split(in.readUTF(), in.readUTF(), in.readLong());
        }
    }

    static final class PendingSerializer implements SimpleVersionedSerializer<List<Split>> {
        private final SplitSerializer one = new SplitSerializer();

        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(List<Split> splits) throws IOException {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            DataOutputStream out = new DataOutputStream(b);
            out.writeInt(splits.size());
            for (Split s : splits) {
                byte[] x = one.serialize(s);
                out.writeInt(x.length);
                out.write(x);
            }
            out.flush();
            return b.toByteArray();
        }

        @Override
        public List<Split> deserialize(int version, byte[] data) throws IOException {
            DataInputStream in = new DataInputStream(new ByteArrayInputStream(data));
            int n = in.readInt();
            List<Split> splits = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                byte[] x = new byte[in.readInt()];
                in.readFully(x);
                splits.add(one.deserialize(version, x));
            }
            return splits;
        }
    }
}
