/// Why a wire value does not fit a field of its contract.
public struct FieldValueError: Error, Hashable, Sendable {
    /// What kind of misfit it is, for callers that answer each differently (a server maps
    /// ``tooLarge`` to its own error code).
    public enum Kind: Hashable, Sendable {
        /// The value is not one of the field's type, or breaks another of its rules.
        case invalid
        /// The value is of the field's type but larger than its byte limit
        /// (``FieldDescriptor/maxBytes``).
        case tooLarge
        /// A `file` field's reference names a content type the field does not accept
        /// (``FieldDescriptor/contentTypes``).
        case contentTypeNotAllowed
    }

    /// The field's name.
    public var field: String
    /// What is wrong, without the field's name: `must be a whole number`.
    public var reason: String
    /// What kind of misfit it is.
    public var kind: Kind

    /// An error about a field, with the reason and kind of the misfit.
    public init(field: String, reason: String, kind: Kind = .invalid) {
        self.field = field
        self.reason = reason
        self.kind = kind
    }

    /// Whether the value was refused for its size alone (``Kind/tooLarge``).
    public var isTooLarge: Bool { kind == .tooLarge }

    /// The field's name and the reason: `'score' must be a whole number`.
    public var message: String { "'\(field)' \(reason)" }
}
