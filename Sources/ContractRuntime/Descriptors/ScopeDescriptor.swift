/// A sync scope from the manifest.
public struct ScopeDescriptor: Hashable, Sendable {
    public enum Access: String, Hashable, Sendable, CaseIterable {
        /// Devices read; only the server writes.
        case read
        /// Devices read and write.
        case readWrite = "read_write"
    }

    public var name: String
    /// The key template, for example `progress:user:{user_id}`.
    public var keyTemplate: String
    public var access: Access

    public init(name: String, keyTemplate: String, access: Access) {
        self.name = name
        self.keyTemplate = keyTemplate
        self.access = access
    }

    /// The placeholder names of the key template, in order (`user_id` for `progress:user:{user_id}`).
    public var placeholders: [String] { ScopePlaceholder.names(in: keyTemplate) }

    /// The key with its placeholders filled (`{user_id}` → `values["user_id"]`); `nil` if one is missing.
    public func key(_ values: [String: String]) -> String? {
        var result = ""
        var placeholder: String?
        for character in keyTemplate {
            if character == "{" {
                placeholder = ""
            } else if character == "}", let name = placeholder {
                guard let value = values[name] else { return nil }
                result += value
                placeholder = nil
            } else if placeholder != nil {
                placeholder!.append(character)
            } else {
                result.append(character)
            }
        }
        // An unclosed `{` is a malformed template, not text.
        return placeholder == nil ? result : nil
    }
}
