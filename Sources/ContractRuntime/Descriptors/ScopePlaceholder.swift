/// The placeholders a scope key template may use, and where each one's value comes from.
public enum ScopePlaceholder: String, Hashable, Sendable, CaseIterable {
    case tenantID = "tenant_id"
    case userID = "user_id"
    case deviceID = "device_id"
    /// Filled from the row's own `team_id` field; a token grants a device its teams' keys.
    case teamID = "team_id"

    /// The placeholders a device token fills; any other one comes from the row's field of that
    /// name (which the compiler requires: SCOPE_KEY_FIELD_MISSING).
    public static let filledByToken: Set<String> = [tenantID.rawValue, userID.rawValue, deviceID.rawValue]

    /// The placeholder names of a key template, in order (`user_id` for `progress:user:{user_id}`).
    public static func names(in template: String) -> [String] {
        var names: [String] = []
        var current: String?
        for character in template {
            if character == "{" {
                current = ""
            } else if character == "}", let name = current {
                names.append(name)
                current = nil
            } else if current != nil {
                current!.append(character)
            }
        }
        return names
    }
}
