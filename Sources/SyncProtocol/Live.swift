import ContractRuntime

/// What the live channel (`GET /sync/v1/live`, server-sent events) tells a device.
///
/// The channel never carries data: a ``change(scope:sequence:)`` only says that a scope the
/// device may read moved past `sequence`, and the device pulls it as always, so authorization,
/// shaping and paging stay in one place (the pull route).
public enum LiveEvent: Hashable, Sendable {
    /// The first event: the channel is open and something (an event or a heartbeat comment)
    /// arrives at least every `heartbeatMilliseconds`; a device that hears nothing for longer
    /// treats the connection as dead.
    case hello(heartbeatMilliseconds: Int)
    /// A scope the device may read changed; `sequence` is the scope's sequence after the commit
    /// (a hint: a device whose cursor is at or past it has nothing to pull).
    case change(scope: String, sequence: Int64)
    /// The server may have missed commits (it stopped hearing them for a while): every scope
    /// may have changed, so the device pulls them all.
    case resync
    /// The server closes the channel after this event; ``LiveCloseReason`` says why.
    case bye(reason: LiveCloseReason)

    /// The event in `text/event-stream` form, ending with the blank line that dispatches it.
    public var serverSentEvent: String {
        switch self {
        case .hello(let heartbeat):
            Self.frame("hello", .object(["heartbeat_ms": .int(Int64(heartbeat))]))
        case .change(let scope, let sequence):
            Self.frame("change", .object(["scope": .string(scope), "seq": .int(sequence)]))
        case .resync:
            Self.frame("resync", .object([:]))
        case .bye(let reason):
            Self.frame("bye", .object(["reason": .string(reason.rawValue)]))
        }
    }

    /// The SSE comment the server writes when it has nothing else to say for a heartbeat.
    public static let heartbeat = ": heartbeat\n\n"

    private static func frame(_ name: String, _ data: JSONValue) -> String {
        "event: \(name)\ndata: \(CanonicalJSON.text(data))\n\n"
    }

    /// Reads one dispatched server-sent event; `nil` for an event this version does not know
    /// (a newer server may add some: a device ignores them) or whose data is not what it says.
    public init?(_ event: ServerSentEvent) {
        guard case .object(let data)? = JSONParser.parse(event.data) else { return nil }
        switch event.name {
        case "hello":
            guard case .int(let heartbeat)? = data["heartbeat_ms"], heartbeat > 0, heartbeat <= Int64(Int32.max) else { return nil }
            self = .hello(heartbeatMilliseconds: Int(heartbeat))
        case "change":
            guard case .string(let scope)? = data["scope"], case .int(let sequence)? = data["seq"] else { return nil }
            self = .change(scope: scope, sequence: sequence)
        case "resync":
            self = .resync
        case "bye":
            guard case .string(let reason)? = data["reason"] else { return nil }
            self = .bye(reason: LiveCloseReason(rawValue: reason))
        default:
            return nil
        }
    }
}

/// Why the server closed a live channel.
public struct LiveCloseReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The reason as the server writes it (`token_expired`).
    public var rawValue: String
    /// A reason from its raw value; unknown ones are kept as sent.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The raw value.
    public var description: String { rawValue }

    /// The device opened more channels than the server keeps per device; this, its oldest, closed.
    public static let replaced = LiveCloseReason(rawValue: "replaced")
    /// The token the channel was opened with expired; reconnect with a fresh one.
    public static let tokenExpired = LiveCloseReason(rawValue: "token_expired")
    /// The device or its user was revoked, or the user's data erased, since the channel opened.
    public static let revoked = LiveCloseReason(rawValue: "revoked")
    /// The server is shutting down; reconnect (to another process) after the retry schedule.
    public static let shutdown = LiveCloseReason(rawValue: "shutdown")
}

/// One dispatched server-sent event: its `event` name (`message` when it had none) and its
/// `data` lines joined with line feeds.
public struct ServerSentEvent: Hashable, Sendable {
    /// The event's name: `message` when the stream gave none.
    public var name: String
    /// The event's `data` lines, joined with line feeds.
    public var data: String

    /// An event from its name and data.
    public init(name: String, data: String) {
        self.name = name
        self.data = data
    }
}

/// Splits a `text/event-stream` into events, by the HTML Living Standard's rules: lines end at
/// CR, LF or CRLF; `event` and `data` fields; lines starting with `:` are comments; a blank
/// line dispatches. Bytes may arrive cut anywhere, even inside a UTF-8 sequence or a CRLF.
public struct ServerSentEventParser: Sendable {
    /// A line longer than this fails the stream instead of growing without bound (a live event
    /// is well under 1 KiB).
    public static let maximumLineBytes = 64 * 1024

    /// A stream that cannot be read as events.
    public struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// What is wrong with the stream.
        public var description: String
    }

    private var line: [UInt8] = []
    private var lastWasCarriageReturn = false
    private var name = ""
    private var data: [String] = []

    /// A parser at the start of a stream.
    public init() {}

    /// Feeds the bytes that arrived and returns the events they completed.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(Failure) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\n") where lastWasCarriageReturn:
                // The LF of a CRLF: the line already ended at the CR.
                lastWasCarriageReturn = false
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                lastWasCarriageReturn = byte == UInt8(ascii: "\r")
                if let event = endLine() { events.append(event) }
            default:
                lastWasCarriageReturn = false
                guard line.count < Self.maximumLineBytes else {
                    throw Failure(description: "a server-sent event line is longer than \(Self.maximumLineBytes) bytes")
                }
                line.append(byte)
            }
        }
        return events
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        guard !line.isEmpty else {
            defer {
                name = ""
                data.removeAll()
            }
            guard !data.isEmpty else { return nil }
            return ServerSentEvent(name: name.isEmpty ? "message" : name, data: data.joined(separator: "\n"))
        }
        if line[0] == UInt8(ascii: ":") { return nil }
        let text = String(decoding: line, as: UTF8.self)
        let field: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            field = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            field = text[...]
            value = ""
        }
        switch field {
        case "event": name = String(value)
        case "data": data.append(String(value))
        default: break  // `id` and `retry` are not used by the live channel; unknown fields are ignored.
        }
        return nil
    }
}
