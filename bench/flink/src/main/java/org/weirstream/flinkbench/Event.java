package org.weirstream.flinkbench;

/**
 * One line of gateway-events as the source parsed it: a request, a response, or a line the
 * parser rejected (a dead letter, with the partition and byte offset it came from). Fields of
 * the other kinds are zero. A POJO, so Flink serializes it with its PojoSerializer.
 */
public class Event {
    public static final byte REQUEST = 0;
    public static final byte RESPONSE = 1;
    public static final byte BAD = 2;

    public byte kind;
    public String requestId;
    public String tenantId;
    /** One of Prices.MODELS (interned), on a request. */
    public String model;
    public long ts;
    public long inputTokens;
    public long outputTokens;
    public int status;

    // A dead letter only.
    public int partition;
    public long offset;
    public String line;
    public String reason;

    /** The byte offset after the line, for the source's split state; not serialized. */
    public transient long nextOffset;

    public Event() {}

    /** The event as the orphans output writes it. */
    public Records.Orphan toOrphan() {
        Records.Orphan o = new Records.Orphan();
        o.requestId = requestId;
        o.type = kind == REQUEST ? "request" : "response";
        o.ts = ts;
        o.tenantId = tenantId;
        o.model = model;
        o.inputTokens = inputTokens;
        o.outputTokens = outputTokens;
        o.status = status;
        return o;
    }
}
