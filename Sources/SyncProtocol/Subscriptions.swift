public import ContractRuntime

/// `POST /sync/v1/subscriptions/pull`: one page of each of a device's active subscriptions,
/// each after its own cursor. The schema travels in `X-Outpost-Schema`, as on a pull.
public struct SubscriptionPullRequest: Codable, Sendable, Hashable {
    /// The subscriptions, at most the server's per-device limit (64 by default): a request
    /// with more is refused whole with 400 `too_many_subscriptions`.
    public var subscriptions: [Entry]
    /// Rows per subscription page at most; `nil` for the server's default.
    public var limit: Int?

    /// A request for the given subscriptions' pages.
    public init(subscriptions: [Entry], limit: Int? = nil) {
        self.subscriptions = subscriptions
        self.limit = limit
    }

    /// One subscription the device holds.
    public struct Entry: Codable, Sendable, Hashable {
        /// The device's id of the subscription, echoed in the answer.
        public var id: String
        /// The subscription's name in the contracts (`incident`).
        public var name: String
        /// A value for each of its parameters: a string, number or boolean, or an array of
        /// them for a list parameter.
        public var parameters: [String: JSONValue]
        /// The scope key to read in; `nil` for the one the token grants in the subscription's scope.
        public var scope: String?
        /// The `cursor` of the subscription's previous page; `nil` for its first.
        public var cursor: String?

        /// An entry for one active subscription, after its cursor.
        public init(id: String, name: String, parameters: [String: JSONValue], scope: String? = nil, cursor: String? = nil) {
            self.id = id
            self.name = name
            self.parameters = parameters
            self.scope = scope
            self.cursor = cursor
        }
    }
}

/// The answer to ``SubscriptionPullRequest``: an entry per subscription, in the request's order.
public struct SubscriptionPullResponse: Codable, Sendable, Hashable {
    /// One page per subscription, in the request's order.
    public var subscriptions: [Page]
    /// The last of this device's pushes (`seq`) the server has done.
    public var lastSeq: Int64

    /// A response from its pages.
    public init(subscriptions: [Page], lastSeq: Int64 = 0) {
        self.subscriptions = subscriptions
        self.lastSeq = lastSeq
    }

    enum CodingKeys: String, CodingKey {
        case subscriptions
        case lastSeq = "last_seq"
    }

    /// One subscription's page, or why it has none.
    public struct Page: Codable, Sendable, Hashable {
        /// The device's id of the subscription.
        public var id: String
        /// Where its next page starts; `nil` with an ``error``.
        public var cursor: String?
        /// Whether more pages of the subscription follow.
        public var hasMore: Bool
        /// Rows that entered the subscription or changed since the cursor, per contract name,
        /// shaped for the device's schema version, as on a pull page.
        public var upserts: [String: [JSONValue]]
        /// Primary keys of the subscription's rows deleted since the cursor, per contract name.
        public var deletes: [String: [String]]
        /// Primary keys of rows that no longer match since the cursor (they still exist), per
        /// contract name: the device drops them unless something else it syncs holds them, with
        /// the rows it took along through them.
        public var leaves: [String: [String]]
        /// Why this subscription has no page: `forbidden` (the token may not read what it
        /// selects; store nothing of it), `cursor_expired` (sync it again from no cursor),
        /// `subscription_too_broad`, `unknown_subscription`, `malformed_request`.
        public var error: ErrorDetail?

        /// A page from its parts.
        public init(
            id: String, cursor: String?, hasMore: Bool, upserts: [String: [JSONValue]] = [:], deletes: [String: [String]] = [:],
            leaves: [String: [String]] = [:], error: ErrorDetail? = nil
        ) {
            self.id = id
            self.cursor = cursor
            self.hasMore = hasMore
            self.upserts = upserts
            self.deletes = deletes
            self.leaves = leaves
            self.error = error
        }

        enum CodingKeys: String, CodingKey {
            case id, cursor
            case hasMore = "has_more"
            case upserts, deletes, leaves, error
        }

        /// Rows the page carries: upserts, deletes and leaves.
        public var rowCount: Int {
            upserts.values.reduce(0) { $0 + $1.count } + deletes.values.reduce(0) { $0 + $1.count }
                + leaves.values.reduce(0) { $0 + $1.count }
        }
    }
}
