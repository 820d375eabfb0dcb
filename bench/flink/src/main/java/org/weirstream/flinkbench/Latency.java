package org.weirstream.flinkbench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Instant;

/**
 * End-to-end latency at a fixed rate, as weir's internal/bench/latency.go measures it: the
 * source releases each event at its event time plus a shift of wall-clock time, decided by the
 * first reader to start (a second from then, less the events' base time) and written to the
 * file {@code start} of the run's latency directory, which the other readers and the sinks
 * read; a sink counts each row's wall-clock arrival less its due time plus the shift, in
 * microseconds, into a histogram of the same buckets as weir's (values below 128 exactly,
 * larger ones in 64 buckets per power of two), written as lines "LEAST COUNT" to
 * latency-N.txt, N the sink subtask.
 */
final class Latency {
    static final int BUCKETS = 128 + 57 * 64;
    private static final long START_DELAY_MS = 1000;

    private Latency() {}

    /** The shift in milliseconds of the run whose latency directory is dir, decided once. */
    static long shift(String dir, long base) throws IOException {
        Path start = Path.of(dir, "start");
        try {
            return read(start);
        } catch (NoSuchFileException e) {
            // decide it
        }
        long shift = System.currentTimeMillis() + START_DELAY_MS - base;
        Path tmp = Files.createTempFile(Path.of(dir), ".start-", "");
        try {
            Files.writeString(tmp, Long.toString(shift));
            try {
                Files.createLink(start, tmp);
            } catch (FileAlreadyExistsException e) {
                // another reader decided it first
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
        return read(start);
    }

    private static long read(Path start) throws IOException {
        return Long.parseLong(new String(Files.readAllBytes(start), StandardCharsets.UTF_8).trim());
    }

    /** The wall-clock time in microseconds. */
    static long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
    }

    static int bucket(long v) {
        if (v < 128) {
            return (int) v;
        }
        int e = 64 - Long.numberOfLeadingZeros(v) - 7;
        return 128 + (e - 1) * 64 + (int) (v >>> e) - 64;
    }

    static long least(int i) {
        if (i < 128) {
            return i;
        }
        int e = (i - 128) / 64 + 1;
        return ((long) ((i - 128) % 64 + 64)) << e;
    }

    /** Writes counts to dir/latency-subtask.txt. */
    static void write(String dir, int subtask, long[] counts) throws IOException {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < counts.length; i++) {
            if (counts[i] > 0) {
                b.append(least(i)).append(' ').append(counts[i]).append('\n');
            }
        }
        Files.writeString(Path.of(dir, "latency-" + subtask + ".txt"), b.toString());
    }
}
