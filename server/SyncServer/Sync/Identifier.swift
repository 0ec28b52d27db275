import SyncProtocol

/// The server's side of ``UnicodeIdentifier``: every identifier a request names is checked where
/// it enters, before it is compared with anything.
enum Identifier {
    /// Refuses `value` (what the request calls `name`) with 400 `identifier_not_normalized`
    /// unless it is in NFC.
    static func require(_ value: some StringProtocol, as name: String) throws(ServiceError) {
        guard !UnicodeIdentifier.isNormalized(value) else { return }
        throw refusal(String(value), as: name)
    }

    static func refusal(_ value: String, as name: String, status: Int = 400) -> ServiceError {
        ServiceError(
            status: status, .identifierNotNormalized,
            "`\(name)` must be in Unicode Normalization Form C (NFC): `\(value)` is another spelling of `\(UnicodeIdentifier.normalized(value))`; identifiers are compared byte for byte"
        )
    }
}
