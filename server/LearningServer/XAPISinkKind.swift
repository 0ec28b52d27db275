public import ContractRuntime
public import Foundation
import SyncProtocol
public import SyncServer

/// The learning app's sink kind, `xapi`: a contract's rows as xAPI 1.0.3 statements, POSTed
/// with Basic credentials to a learning record store's `statements` resource (``XAPIStatements``
/// says how each row maps).
///
/// Its settings (`"xapi": {…}` of `POST /admin/v1/sinks`, `--setting` of `sinks add`):
///
/// | setting | |
/// | --- | --- |
/// | `user`, `password` | the LRS's Basic credentials (the password is secret: sealed, never shown) |
/// | `home_page` | the `homePage` of the actors' accounts: the system the user ids belong to (an http or https URL) |
/// | `contract` | the entity whose created rows become statements (`Statement` by default); the sink receives that contract alone |
/// | `activity_base` | where activity IRIs start (`<home_page>/activities/` by default) |
public struct XAPISinkKind: SinkKind {
    /// The `xapi` kind.
    public init() {}

    /// `xapi`.
    public var name: String { "xapi" }

    static let settingNames: Set<String> = ["user", "password", "home_page", "contract", "activity_base"]

    /// Checks the settings of the table above: the contract is an entity of the server with the
    /// fields a statement is made of, the credentials and the home page are given, the URLs are
    /// http or https; `contracts` is refused (the sink receives its one contract).
    public func configure(_ settings: [String: String], contracts: [String]?, catalog: ContractCatalog) throws(SinkSettingsError) -> SinkSettings {
        if let unknown = settings.keys.sorted().first(where: { !Self.settingNames.contains($0) }) {
            throw SinkSettingsError(
                "an xAPI sink has no setting `\(unknown)` (it takes \(Self.settingNames.sorted().joined(separator: ", ")))")
        }
        if contracts != nil { throw SinkSettingsError("an xAPI sink delivers its one contract: leave `contracts` out") }
        let contract = settings["contract"] ?? "Statement"
        guard let entity = catalog.entity(named: contract) else {
            throw SinkSettingsError(
                "'\(contract)' is not an entity of this server (xAPI statements are made of its rows)", isUnknownContract: true)
        }
        if let problem = XAPIStatements.problem(with: entity) { throw SinkSettingsError(problem) }
        guard let user = settings["user"], !user.isEmpty, let password = settings["password"], !password.isEmpty else {
            throw SinkSettingsError("an xAPI sink needs the learning record store's Basic credentials (`user` and `password`)")
        }
        guard let homePage = settings["home_page"] else {
            throw SinkSettingsError("an xAPI sink needs the `home_page` of its actors' accounts (the system the user ids belong to)")
        }
        try Self.requireHTTPURL(homePage, as: "the xAPI home page")
        var values = ["user": user, "contract": contract, "home_page": homePage]
        if let base = settings["activity_base"] {
            try Self.requireHTTPURL(base, as: "the xAPI activity base")
            values["activity_base"] = base
        }
        return SinkSettings(values: values, secrets: ["password": password], contracts: [contract])
    }

    /// The LRS's `statements` resource under the URL the sink was added with.
    public func destination(of url: String, settings: SinkSettings) -> String {
        (url.hasSuffix("/") ? String(url.dropLast()) : url) + "/statements"
    }

    /// `X-Experience-API-Version: 1.0.3` and the LRS's Basic credentials.
    public func headers(of settings: SinkSettings) -> [(name: String, value: String)] {
        let credentials = Data("\(settings.values["user"] ?? ""):\(settings.secrets["password"] ?? "")".utf8).base64EncodedString()
        return [("X-Experience-API-Version", "1.0.3"), ("Authorization", "Basic \(credentials)")]
    }

    /// The statements of the batch's created rows of the sink's contract; `nil` when there are none.
    public func body(for batch: SinkBatch) -> Data? {
        guard let contract = batch.settings.values["contract"], let homePage = batch.settings.values["home_page"] else { return nil }
        let statements = batch.changes.compactMap {
            XAPIStatements.statement(
                of: $0, tenant: batch.tenant, contract: contract, homePage: homePage,
                activityBase: batch.settings.values["activity_base"] ?? homePage + "/activities/")
        }
        guard !statements.isEmpty else { return nil }
        return Data(CanonicalJSON.bytes(.array(statements)))
    }

    /// `text` as an http or https URL with a host and no credentials.
    private static func requireHTTPURL(_ text: String, as name: String) throws(SinkSettingsError) {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty, url.user == nil, url.password == nil
        else { throw SinkSettingsError("\(name) must be an http or https URL without credentials in it, not '\(text)'") }
    }
}
