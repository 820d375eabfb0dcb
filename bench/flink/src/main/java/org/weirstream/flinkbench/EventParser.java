package org.weirstream.flinkbench;

import java.nio.charset.StandardCharsets;

/**
 * Parses one line of gateway-events straight from the bytes the source read, in a single pass
 * without reflection or an intermediate tree, allocating only the request and tenant ids. It
 * accepts what weir's parser (examples/gatewaymeter/parse.go) accepts — one JSON object with
 * known fields of the right types, unknown fields skipped — and turns anything else into a
 * dead letter. The reasons are its own words: the keys and lines of dead letters match weir's,
 * their reason texts do not.
 */
final class EventParser {
    static final long MAX_TOKENS = 1_000_000_000L;

    private static final int F_TYPE = 1, F_REQUEST_ID = 2, F_TENANT_ID = 4, F_MODEL = 8, F_TS = 16,
            F_INPUT = 32, F_OUTPUT = 64, F_STATUS = 128;
    private static final int REQUEST_FIELDS = F_TYPE | F_REQUEST_ID | F_TENANT_ID | F_MODEL | F_TS | F_INPUT;
    private static final int RESPONSE_FIELDS = F_TYPE | F_REQUEST_ID | F_TS | F_OUTPUT | F_STATUS;

    /** A line that is not an event; its message is the dead letter's reason. */
    static final class Reject extends Exception {
        Reject(String reason) {
            super(reason, null, false, false);
        }
    }

    private byte[] b;
    private int i, end, from;
    private final byte[] scratch = new byte[256];

    /** Parses b[from, to) into e, or fills e as a dead letter. */
    void parse(byte[] b, int from, int to, Event e, int partition, long offset) {
        this.b = b;
        this.i = from;
        this.from = from;
        this.end = to;
        try {
            event(e);
        } catch (Reject r) {
            e.kind = Event.BAD;
            e.requestId = e.tenantId = e.model = null;
            e.ts = e.inputTokens = e.outputTokens = 0;
            e.status = 0;
            e.partition = partition;
            e.offset = offset;
            e.line = new String(b, from, to - from, StandardCharsets.UTF_8);
            e.reason = r.getMessage();
        }
    }

    private static final byte[] CANONICAL_REQUEST = "{\"type\":\"request\",\"request_id\":\"".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CANONICAL_RESPONSE = "{\"type\":\"response\",\"request_id\":\"".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] TENANT_ID = ",\"tenant_id\":\"".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] MODEL = ",\"model\":\"".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] TS = ",\"ts\":".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] INPUT_TOKENS = ",\"input_tokens\":".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] OUTPUT_TOKENS = ",\"output_tokens\":".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] STATUS = ",\"status\":".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CLOSE = "}".getBytes(StandardCharsets.US_ASCII);

    private void event(Event e) throws Reject {
        if (canonical(e)) {
            return;
        }
        i = from;
        e.kind = -1;
        e.requestId = e.tenantId = e.model = null;
        e.ts = e.inputTokens = e.outputTokens = 0;
        e.status = 0;
        ws();
        if (i >= end || b[i] != '{') {
            throw new Reject("not a JSON object");
        }
        i++;
        ws();
        int seen = 0;
        if (i < end && b[i] == '}') {
            i++;
        } else {
            for (;;) {
                if (i >= end || b[i] != '"') {
                    throw new Reject("want a field name at byte " + (i - from));
                }
                int f = fieldName();
                ws();
                expect(':');
                ws();
                if (f != 0) {
                    if ((seen & f) != 0) {
                        throw new Reject("duplicate field");
                    }
                    seen |= f;
                }
                field(f, e);
                ws();
                if (i >= end) {
                    throw new Reject("truncated line");
                }
                if (b[i] == ',') {
                    i++;
                    ws();
                    continue;
                }
                if (b[i] == '}') {
                    i++;
                    break;
                }
                throw new Reject("want ',' or '}' at byte " + (i - from));
            }
        }
        ws();
        if (i < end) {
            throw new Reject("data after the object");
        }
        if ((seen & F_TYPE) == 0) {
            throw new Reject("missing field \"type\"");
        }
        int want = e.kind == Event.REQUEST ? REQUEST_FIELDS : RESPONSE_FIELDS;
        if ((want & ~seen) != 0) {
            throw new Reject("missing field");
        }
        if ((seen & ~want) != 0) {
            throw new Reject("a field of the other type");
        }
    }

    /**
     * Parses a line written exactly as weir's Event.AppendJSON writes one (the generator's form),
     * with identifiers of plain ASCII and every value valid, into e; for any other line it returns
     * false and event's general parse decides. It accepts only what the general parse accepts,
     * with the same event: the same fast path as weir's parser (parse.go, canonical).
     */
    private boolean canonical(Event e) {
        byte kind;
        if (lit(CANONICAL_REQUEST)) {
            kind = Event.REQUEST;
        } else if (lit(CANONICAL_RESPONSE)) {
            kind = Event.RESPONSE;
        } else {
            return false;
        }
        int idFrom = i;
        int idLen = plainString();
        if (idLen <= 0) {
            return false;
        }
        int tenantFrom = 0, tenantLen = 0;
        String model = null;
        long ts, in = 0, out = 0, status = 0;
        if (kind == Event.REQUEST) {
            if (!lit(TENANT_ID)) {
                return false;
            }
            tenantFrom = i;
            if ((tenantLen = plainString()) <= 0 || !lit(MODEL)) {
                return false;
            }
            int modelFrom = i, n = plainString();
            if (n == 5 && same(modelFrom, "small")) {
                model = "small";
            } else if (n == 6 && same(modelFrom, "medium")) {
                model = "medium";
            } else if (n == 5 && same(modelFrom, "large")) {
                model = "large";
            } else {
                return false;
            }
            if (!lit(TS) || (ts = plainInt()) < 0 || !lit(INPUT_TOKENS) || (in = plainInt()) < 0 || in > MAX_TOKENS) {
                return false;
            }
        } else {
            if (!lit(TS) || (ts = plainInt()) < 0 || !lit(OUTPUT_TOKENS) || (out = plainInt()) < 0 || out > MAX_TOKENS
                    || !lit(STATUS) || (status = plainInt()) < 100 || status > 599) {
                return false;
            }
        }
        if (!lit(CLOSE) || i != end) {
            return false;
        }
        e.kind = kind;
        e.requestId = new String(b, idFrom, idLen, StandardCharsets.ISO_8859_1);
        e.tenantId = kind == Event.REQUEST ? new String(b, tenantFrom, tenantLen, StandardCharsets.ISO_8859_1) : null;
        e.model = model;
        e.ts = ts;
        e.inputTokens = in;
        e.outputTokens = out;
        e.status = (int) status;
        return true;
    }

    /** Reports whether lit comes next, and steps over it if so. */
    private boolean lit(byte[] lit) {
        if (end - i < lit.length) {
            return false;
        }
        for (int k = 0; k < lit.length; k++) {
            if (b[i + k] != lit[k]) {
                return false;
            }
        }
        i += lit.length;
        return true;
    }

    private boolean same(int at, String s) {
        for (int k = 0; k < s.length(); k++) {
            if (b[at + k] != s.charAt(k)) {
                return false;
            }
        }
        return true;
    }

    /** Reads plain ASCII (no escapes) up to a closing quote, which it steps over: its length, or -1. */
    private int plainString() {
        int start = i;
        while (i < end) {
            byte c = b[i];
            if (c == '"') {
                i++;
                return i - 1 - start;
            }
            if (c < 0x20 || c == '\\') { // bytes from 0x80 on are negative
                return -1;
            }
            i++;
        }
        return -1;
    }

    /** Reads a non-negative integer of 1 to 18 digits without a leading zero: its value, or -1. */
    private long plainInt() {
        int start = i;
        long v = 0;
        while (i < end && b[i] >= '0' && b[i] <= '9') {
            v = v * 10 + (b[i++] - '0');
        }
        int n = i - start;
        if (n == 0 || n > 18 || (n > 1 && b[start] == '0')) {
            return -1;
        }
        return v;
    }

    private void field(int f, Event e) throws Reject {
        switch (f) {
            case 0:
                skipValue(0);
                return;
            case F_TYPE: {
                int n = string();
                if (eq(n, "request")) {
                    e.kind = Event.REQUEST;
                } else if (eq(n, "response")) {
                    e.kind = Event.RESPONSE;
                } else {
                    throw new Reject("unknown type");
                }
                return;
            }
            case F_REQUEST_ID:
            case F_TENANT_ID: {
                int n = string();
                if (n == 0) {
                    throw new Reject("empty id");
                }
                String s = new String(scratch, 0, n, StandardCharsets.UTF_8);
                if (f == F_REQUEST_ID) {
                    e.requestId = s;
                } else {
                    e.tenantId = s;
                }
                return;
            }
            case F_MODEL: {
                int n = string();
                if (eq(n, "small")) {
                    e.model = "small";
                } else if (eq(n, "medium")) {
                    e.model = "medium";
                } else if (eq(n, "large")) {
                    e.model = "large";
                } else {
                    throw new Reject("unknown model");
                }
                return;
            }
            case F_TS:
                e.ts = integer();
                if (e.ts < 0) {
                    throw new Reject("field \"ts\" is negative");
                }
                return;
            case F_INPUT:
            case F_OUTPUT: {
                long v = integer();
                if (v < 0 || v > MAX_TOKENS) {
                    throw new Reject("token count out of range");
                }
                if (f == F_INPUT) {
                    e.inputTokens = v;
                } else {
                    e.outputTokens = v;
                }
                return;
            }
            case F_STATUS: {
                long v = integer();
                if (v < 100 || v > 599) {
                    throw new Reject("not an HTTP status");
                }
                e.status = (int) v;
                return;
            }
            default:
                throw new IllegalStateException();
        }
    }

    private int fieldName() throws Reject {
        int n = string();
        switch (n) {
            case 2:
                return eq(n, "ts") ? F_TS : 0;
            case 4:
                return eq(n, "type") ? F_TYPE : 0;
            case 5:
                return eq(n, "model") ? F_MODEL : 0;
            case 6:
                return eq(n, "status") ? F_STATUS : 0;
            case 9:
                return eq(n, "tenant_id") ? F_TENANT_ID : 0;
            case 10:
                return eq(n, "request_id") ? F_REQUEST_ID : 0;
            case 12:
                return eq(n, "input_tokens") ? F_INPUT : 0;
            case 13:
                return eq(n, "output_tokens") ? F_OUTPUT : 0;
            default:
                return 0;
        }
    }

    private boolean eq(int n, String lit) {
        if (n != lit.length()) {
            return false;
        }
        for (int k = 0; k < n; k++) {
            if (scratch[k] != lit.charAt(k)) {
                return false;
            }
        }
        return true;
    }

    private void ws() {
        while (i < end) {
            byte c = b[i];
            if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
                return;
            }
            i++;
        }
    }

    private void expect(char c) throws Reject {
        if (i >= end || b[i] != c) {
            throw new Reject("want '" + c + "' at byte " + (i - from));
        }
        i++;
    }

    /** Reads a JSON string into scratch (unescaped, as UTF-8) and returns its length. */
    private int string() throws Reject {
        if (i >= end || b[i] != '"') {
            throw new Reject("want a string at byte " + (i - from));
        }
        i++;
        int n = 0;
        while (i < end) {
            byte c = b[i++];
            if (c == '"') {
                return n;
            }
            if ((c & 0xff) < 0x20) {
                throw new Reject("control character in a string");
            }
            if (c == '\\') {
                if (i >= end) {
                    break;
                }
                byte x = b[i++];
                int cp;
                switch (x) {
                    case '"': cp = '"'; break;
                    case '\\': cp = '\\'; break;
                    case '/': cp = '/'; break;
                    case 'b': cp = '\b'; break;
                    case 'f': cp = '\f'; break;
                    case 'n': cp = '\n'; break;
                    case 'r': cp = '\r'; break;
                    case 't': cp = '\t'; break;
                    case 'u':
                        if (i + 4 > end) {
                            throw new Reject("truncated escape");
                        }
                        cp = Integer.parseInt(new String(b, i, 4, StandardCharsets.US_ASCII), 16);
                        i += 4;
                        break;
                    default:
                        throw new Reject("invalid escape");
                }
                byte[] enc = new String(Character.toChars(cp)).getBytes(StandardCharsets.UTF_8);
                for (byte y : enc) {
                    n = put(n, y);
                }
                continue;
            }
            n = put(n, c);
        }
        throw new Reject("truncated string");
    }

    private int put(int n, byte c) throws Reject {
        if (n == scratch.length) {
            throw new Reject("string longer than " + scratch.length + " bytes");
        }
        scratch[n] = c;
        return n + 1;
    }

    /** Reads a JSON integer (no fraction, no exponent) that fits a long. */
    private long integer() throws Reject {
        int start = i;
        boolean neg = false;
        if (i < end && b[i] == '-') {
            neg = true;
            i++;
        }
        if (i >= end || b[i] < '0' || b[i] > '9') {
            throw new Reject("want an integer at byte " + (start - from));
        }
        if (b[i] == '0' && i + 1 < end && b[i + 1] >= '0' && b[i + 1] <= '9') {
            throw new Reject("leading zero");
        }
        long v = 0;
        while (i < end && b[i] >= '0' && b[i] <= '9') {
            if (v > (Long.MAX_VALUE - 9) / 10) {
                throw new Reject("integer out of range");
            }
            v = v * 10 + (b[i++] - '0');
        }
        if (i < end && (b[i] == '.' || b[i] == 'e' || b[i] == 'E')) {
            throw new Reject("want an integer, got a fraction");
        }
        return neg ? -v : v;
    }

    /** Skips any JSON value (of an unknown field). */
    private void skipValue(int depth) throws Reject {
        if (depth > 64) {
            throw new Reject("nested too deep");
        }
        if (i >= end) {
            throw new Reject("truncated line");
        }
        byte c = b[i];
        switch (c) {
            case '"':
                string();
                return;
            case '{':
            case '[': {
                byte close = c == '{' ? (byte) '}' : (byte) ']';
                i++;
                ws();
                if (i < end && b[i] == close) {
                    i++;
                    return;
                }
                for (;;) {
                    if (c == '{') {
                        string();
                        ws();
                        expect(':');
                        ws();
                    }
                    skipValue(depth + 1);
                    ws();
                    if (i >= end) {
                        throw new Reject("truncated line");
                    }
                    if (b[i] == ',') {
                        i++;
                        ws();
                        continue;
                    }
                    if (b[i] == close) {
                        i++;
                        return;
                    }
                    throw new Reject("want ',' at byte " + (i - from));
                }
            }
            case 't':
                literal("true");
                return;
            case 'f':
                literal("false");
                return;
            case 'n':
                literal("null");
                return;
            default:
                number();
        }
    }

    private void literal(String lit) throws Reject {
        for (int k = 0; k < lit.length(); k++) {
            if (i >= end || b[i] != lit.charAt(k)) {
                throw new Reject("invalid literal");
            }
            i++;
        }
    }

    private void number() throws Reject {
        int start = i;
        if (i < end && b[i] == '-') {
            i++;
        }
        int digits = 0;
        while (i < end && ((b[i] >= '0' && b[i] <= '9') || b[i] == '.' || b[i] == 'e' || b[i] == 'E' || b[i] == '+' || b[i] == '-')) {
            i++;
            digits++;
        }
        if (digits == 0) {
            throw new Reject("invalid value at byte " + (start - from));
        }
    }
}
