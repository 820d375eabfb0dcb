package org.weirstream.flinkbench;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The job's intermediate and output records, with the JSON-lines form of each output: the
 * same fields, in the same order, as weir's GatewayMeter writes them (Go's encoding/json of
 * examples/gatewaymeter's types), so that {@code weir verify gatewaymeter} reads either.
 */
public final class Records {
    private Records() {}

    /** The micro-dollar price per token of a model: {input, output}. */
    static long cost(String model, long in, long out) {
        switch (model) {
            case "small":
                return in + 2 * out;
            case "medium":
                return 3 * in + 15 * out;
            case "large":
                return 15 * in + 75 * out;
            default:
                throw new IllegalArgumentException("no price for model " + model);
        }
    }

    /** A request joined with its response; its event time is endTs. */
    public static class RequestRecord {
        public String requestId;
        public String tenantId;
        public String model;
        public long startTs;
        public long endTs;
        public long latencyMs;
        public long inputTokens;
        public long outputTokens;
        public int status;
        public long costMicros;

        public RequestRecord() {}

        static RequestRecord join(Event a, Event b) {
            if (a.kind == Event.RESPONSE) {
                Event t = a;
                a = b;
                b = t;
            }
            if (b.ts < a.ts) {
                throw new IllegalStateException("request " + a.requestId + ": response at " + b.ts + " is before the request at " + a.ts);
            }
            RequestRecord r = new RequestRecord();
            r.requestId = a.requestId;
            r.tenantId = a.tenantId;
            r.model = a.model;
            r.startTs = a.ts;
            r.endTs = b.ts;
            r.latencyMs = b.ts - a.ts;
            r.inputTokens = a.inputTokens;
            r.outputTokens = b.outputTokens;
            r.status = b.status;
            r.costMicros = cost(a.model, a.inputTokens, b.outputTokens);
            return r;
        }
    }

    /** What model-latency keeps of a request: its model, end and latency. */
    public static class LatencySample {
        public String model;
        public long endTs;
        public long latencyMs;

        public LatencySample() {}
    }

    /** The output tenant-cost. */
    public static class TenantCostMinute {
        public String tenantId;
        public long windowStart;
        public long windowEnd;
        public long costMicros;
        public long requests;

        public TenantCostMinute() {}
    }

    /** The output model-latency. */
    public static class ModelLatencyMinute {
        public String model;
        public long windowStart;
        public long windowEnd;
        public long requests;
        public long p50Ms;
        public long p95Ms;
        public long p99Ms;
        public long maxMs;

        public ModelLatencyMinute() {}
    }

    /** The output alerts. */
    public static class Alert {
        public String tenantId;
        public long windowEnd;
        public long costMicros;
        public long baselineMicros;

        public Alert() {}
    }

    /** The output orphans: the one event of a request whose partner never came. */
    public static class Orphan {
        public String requestId;
        public String type;
        public long ts;
        public String tenantId;
        public String model;
        public long inputTokens;
        public long outputTokens;
        public int status;

        public Orphan() {}
    }

    /** Nearest-rank percentile of sorted: the k-th smallest with k = ceil(p·n/100). */
    /** The index in the sorted sample of n values of its p-th percentile (nearest rank). */
    static int rank(int n, int p) {
        return Math.max(1, Math.min((p * n + 99) / 100, n)) - 1;
    }

    /**
     * Reorders a[lo..hi] so that a[k] holds the value the sorted range would hold there, nothing
     * after it smaller and nothing before it greater: quickselect with median-of-three pivots,
     * sorting instead once the partitions keep coming out lopsided.
     */
    static void selectRank(long[] a, int lo, int hi, int k) {
        for (int budget = 2 * (32 - Integer.numberOfLeadingZeros(hi - lo + 1)); hi - lo > 16; budget--) {
            if (budget == 0) {
                Arrays.sort(a, lo, hi + 1);
                return;
            }
            int mid = lo + (hi - lo) / 2;
            if (a[mid] < a[lo]) {
                swap(a, mid, lo);
            }
            if (a[hi] < a[lo]) {
                swap(a, hi, lo);
            }
            if (a[hi] < a[mid]) {
                swap(a, hi, mid);
            }
            long p = a[mid];
            int i = lo, j = hi;
            while (i <= j) {
                while (a[i] < p) {
                    i++;
                }
                while (a[j] > p) {
                    j--;
                }
                if (i <= j) {
                    swap(a, i++, j--);
                }
            }
            if (k <= j) {
                hi = j;
            } else if (k >= i) {
                lo = i;
            } else {
                return;
            }
        }
        Arrays.sort(a, lo, hi + 1);
    }

    private static void swap(long[] a, int i, int j) {
        long t = a[i];
        a[i] = a[j];
        a[j] = t;
    }

    // JSON lines, as Go's encoding/json writes these structs.

    static byte[] json(TenantCostMinute m) {
        StringBuilder b = new StringBuilder(128);
        b.append("{\"tenant_id\":");
        str(b, m.tenantId);
        b.append(",\"window_start\":").append(m.windowStart);
        b.append(",\"window_end\":").append(m.windowEnd);
        b.append(",\"cost_micros\":").append(m.costMicros);
        b.append(",\"requests\":").append(m.requests);
        return line(b);
    }

    static byte[] json(ModelLatencyMinute m) {
        StringBuilder b = new StringBuilder(160);
        b.append("{\"model\":");
        str(b, m.model);
        b.append(",\"window_start\":").append(m.windowStart);
        b.append(",\"window_end\":").append(m.windowEnd);
        b.append(",\"requests\":").append(m.requests);
        b.append(",\"p50_ms\":").append(m.p50Ms);
        b.append(",\"p95_ms\":").append(m.p95Ms);
        b.append(",\"p99_ms\":").append(m.p99Ms);
        b.append(",\"max_ms\":").append(m.maxMs);
        return line(b);
    }

    static byte[] json(Alert a) {
        StringBuilder b = new StringBuilder(128);
        b.append("{\"tenant_id\":");
        str(b, a.tenantId);
        b.append(",\"window_end\":").append(a.windowEnd);
        b.append(",\"cost_micros\":").append(a.costMicros);
        b.append(",\"baseline_micros\":").append(a.baselineMicros);
        return line(b);
    }

    /** An orphan; the fields Go marks omitempty are left out when zero. */
    static byte[] json(Orphan o) {
        StringBuilder b = new StringBuilder(160);
        b.append("{\"request_id\":");
        str(b, o.requestId);
        b.append(",\"type\":");
        str(b, o.type);
        b.append(",\"ts\":").append(o.ts);
        if (o.tenantId != null && !o.tenantId.isEmpty()) {
            b.append(",\"tenant_id\":");
            str(b, o.tenantId);
        }
        if (o.model != null && !o.model.isEmpty()) {
            b.append(",\"model\":");
            str(b, o.model);
        }
        if (o.inputTokens != 0) {
            b.append(",\"input_tokens\":").append(o.inputTokens);
        }
        if (o.outputTokens != 0) {
            b.append(",\"output_tokens\":").append(o.outputTokens);
        }
        if (o.status != 0) {
            b.append(",\"status\":").append(o.status);
        }
        return line(b);
    }

    static byte[] json(Event d) {
        StringBuilder b = new StringBuilder(256);
        b.append("{\"partition\":").append(d.partition);
        b.append(",\"offset\":").append(d.offset);
        b.append(",\"line\":");
        str(b, d.line);
        b.append(",\"reason\":");
        str(b, d.reason);
        return line(b);
    }

    private static byte[] line(StringBuilder b) {
        b.append("}\n");
        return b.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** Appends s as a JSON string, escaped as Go's encoding/json does. */
    static void str(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    b.append("\\\"");
                    break;
                case '\\':
                    b.append("\\\\");
                    break;
                case '\n':
                    b.append("\\n");
                    break;
                case '\r':
                    b.append("\\r");
                    break;
                case '\t':
                    b.append("\\t");
                    break;
                case '<':
                case '>':
                case '&':
                case '\u2028':
                case '\u2029':
                    b.append(String.format("\\u%04x", (int) c));
                    break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        b.append('"');
    }
}
