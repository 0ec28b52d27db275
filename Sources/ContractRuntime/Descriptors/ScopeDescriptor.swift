/// A sync scope from the manifest.
public struct ScopeDescriptor: Hashable, Sendable {
    /// Who may write a scope's data.
    public enum Access: String, Hashable, Sendable, CaseIterable {
        /// Devices read; only the server writes.
        case read
        /// Devices read and write.
        case readWrite = "read_write"
    }

    /// The scope's name.
    public var name: String
    /// The key template, for example `progress:user:{user_id}`.
    public var keyTemplate: String {
        didSet { template = Template(keyTemplate) }
    }
    /// Who may write the scope's data.
    public var access: Access
    /// The key template taken apart once: a key is filled for every row a push writes.
    private var template: Template

    /// A scope from its name, key template and access.
    public init(name: String, keyTemplate: String, access: Access) {
        self.name = name
        self.keyTemplate = keyTemplate
        self.access = access
        template = Template(keyTemplate)
    }

    /// The placeholder names of the key template, in order (`user_id` for `progress:user:{user_id}`).
    public var placeholders: [String] { template.placeholders }

    /// The key with its placeholders filled (`{user_id}` → `values["user_id"]`); `nil` if one is missing.
    public func key(_ values: [String: String]) -> String? {
        key { values[$0] }
    }

    /// The key with each placeholder filled by `value(name)`; `nil` if one is missing.
    package func key(_ value: (String) -> String?) -> String? {
        // An unclosed `{` is a malformed template, not text.
        guard template.isWellFormed else { return nil }
        var result = ""
        for segment in template.segments {
            switch segment {
            case .literal(let text): result += text
            case .placeholder(let name):
                guard let filled = value(name) else { return nil }
                result += filled
            }
        }
        return result
    }

    /// A key template as literal text and placeholders: `{` opens a placeholder (a second `{`
    /// starts it again), `}` closes an open one and is text otherwise.
    private struct Template: Hashable, Sendable {
        enum Segment: Hashable, Sendable {
            case literal(String)
            case placeholder(String)
        }

        var segments: [Segment] = []
        var placeholders: [String] = []
        /// `false` when a placeholder is left open at the end.
        var isWellFormed = true

        init(_ text: String) {
            var literal = ""
            var placeholder: String?
            for character in text {
                if character == "{" {
                    placeholder = ""
                } else if character == "}", let name = placeholder {
                    if !literal.isEmpty { segments.append(.literal(literal)) }
                    literal = ""
                    segments.append(.placeholder(name))
                    placeholders.append(name)
                    placeholder = nil
                } else if placeholder != nil {
                    placeholder!.append(character)
                } else {
                    literal.append(character)
                }
            }
            if !literal.isEmpty { segments.append(.literal(literal)) }
            isWellFormed = placeholder == nil
        }
    }
}
