/// Whether a device running a given schema version of a contract can sync it.
public enum SchemaSupport: String, Hashable, Sendable {
    /// Below `oldest_supported`: the server answers 426 and the device must update; its cached
    /// rows of that version are purged and fetched again.
    case tooOld
    case supported
    /// Above the version this build knows: written by a newer build.
    case tooNew
}
