/// Why a wire value does not fit a field of its contract.
public struct FieldValueError: Error, Hashable, Sendable {
    /// The field's name.
    public var field: String
    /// What is wrong, without the field's name: `must be a whole number`.
    public var reason: String

    public init(field: String, reason: String) {
        self.field = field
        self.reason = reason
    }

    /// The field's name and the reason: `'score' must be a whole number`.
    public var message: String { "'\(field)' \(reason)" }
}
