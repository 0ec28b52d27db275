import ContractRuntime
import Contracts
import Foundation
import Logging
import OutpostTestSupport
import Testing

@testable import LearningClient
@testable import SyncClient
@testable import SyncServer

/// The engines' own migrations (not the generated ones, which contracts.lock pins) are history:
/// PostgreSQL records each one's checksum in `outpost_migrations` and refuses to open a database
/// whose migration reads otherwise, and every SQLite database in the field was made by the text
/// as released. A change to an engine's tables is a new migration, never an edit.
@Suite("Released engine migrations", .blockingWork)
struct ReleasedEngineMigrationTests {
    /// SHA-256 of the statements joined by `;\n`, as ``PostgresMigrator`` records them.
    private static func checksum(_ statements: [String]) -> String {
        Hex.sha256(Data(statements.joined(separator: ";\n").utf8))
    }

    /// Checksums of the migrations as released, by side and identifier. A new migration is
    /// pinned by adding the line its failure prints.
    private static let released: [String: String] = [
        // Released as c110fae… with the learning app's `assets` table, which moved to its store
        // extension (StoreExtensionTests rebuilds the released text and checks that checksum).
        "client client.v1.sync_tables": "6fec44a89372c2340ce5091a711e05e48ab54af755dc848286d26c5e1dd0f8b9",
        "client client.v3.outbox_state_seal": "8f304dacfe286360db17963d6e7252cef88cb43e62e83fbae24543eac3f7e64d",
        "client client.v4.row_retention": "a9b2170f47b5e5701b3ce58e9ab14e52e62bc94af3eee64dddf06e36a0625083",
        "client client.v6.repull": "2eba30315470bbb6145777e40f2e77b68a8193884ca2595e988f2e656bdf0721",
        "client client.v7.first_downloads": "ae1051f9f98e7d8eaa725ce7c49e19aed521020c2e6aba1146b2ca2626edf94f",
        "client client.v8.subscriptions": "21e57bcf401f475a02d03971ddc9bfce6d7a24c8d9a35aacc0d43dba0b1b68f8",
        "client client.v9.subscription_eviction": "c4d3699ac9ed7661b01f446bba39ae3c56949ac15253703736480b27642bdff4",
        "client client.v10.files": "743561e1336d28e0cbf23e2af8ff2ebc4089d4416a5f6a50c756f18158f1b206",
        // The learning app's tables, the store's own until its client code became a target: two
        // migrations keep their released text and identifiers; `assets` has its own now.
        "learning learning.v1.assets": "af152cd7998c9ce96b43e5ed7edab62026c5388471a57186b3a2778edfd28324",
        "learning client.v2.unit_cache": "8d0dabeebffb514b10cc21fd72bd18989a65cf0037642ad423c981883df83651",
        "learning client.v5.learning_attempts": "d81a4435dddc253ad4ee0c8760048c2ebace20f68805fb5f8bdff5a99f3bdf3c",
        "learning learning.v2.unit_subscriptions": "6227d3853e8e60e6fc8bba385cfbab32355069a36211a055fd5203a4f4649b1c",
        "server postgres server.v1.sync_tables": "b0fb6b817acc1a2a79fed877e819be74a4c6dcbf4dc8da224142d5fad3ba8d06",
        "server postgres server.v2.audit_seal": "d27dccb9282f99ea326ec21e4a341b7c7d54e51c835b45c7065f3ea8c907aa48",
        "server postgres server.v2.client_owners": "7d3147dcc0f632b90e6b08c54c7b2390635bdec7297ad58c49d173e28105d659",
        "server postgres server.v2.identity": "436733dccb874c06c40bd6699b646c6aaf16750a9b021fb3b14fddbdea59a955",
        "server postgres server.v2.rate_windows": "0fda3d633d25806c59a20a2f7fedc93e1e38febb866abf1a842b62607b49a543",
        "server postgres server.v3.audit_details": "1c40982a0417ff6aadc37656677aed2c0e86afaa2a0e33af83773c2dbda60bb3",
        "server postgres server.v3.erasures_urgent_changes": "4c572bea229400d03b8e6c6cb803cb302a3ac77f046d3d833c8b7be8587606a6",
        "server postgres server.v3.horizons": "725372960c8229852a3cb0b4edcc5fdbe8b08daff7cf3279281585866ae2f5fa",
        "server postgres server.v4.push_result_records": "d740007fc24bccd66f7b9a2dbd785728e5f83339a44bc86de11d276731415a0a",
        "server postgres server.v5.change_feed": "326dbfeeecf6ea69d669651f175b36e1f2c5c30203adfeca2a840d6c44234d44",
        "server postgres server.v6.sinks": "a6f09f168350b0edc84c2b10f170841f19003b7a37fbcc727f880b9bae1779ae",
        "server postgres server.v7.device_census": "9a253cdef4cd3b184f148fadaf3065f5b650e5a05b756d0eb4d7a78a89177d77",
        "server postgres server.v8.console_sessions": "98fa394e259633cf94c3d0d2c3343f2d20c97dbaf84a59d7370783b52c156757",
        "server postgres server.v9.device_keys": "daa69b69c99b0854d141544f1bc3f858fb23c99630350a21fab24ff94f427f3a",
        "server postgres server.v10.console_session_keys": "c1f18f51fbe6cd6ae4bdae56497a40a26228b8d570db62fc3aefe535d396939e",
        "server postgres server.v11.subscription_moves": "3fc562f52cd94b62be125279cb3549aa88c2643d8f972bc0a879661616d907fc",
        "server postgres server.v12.files": "8a18008eabf90a389fba406dd4e2cde277225cbef46c63b1dda511e52717dbe1",
        "server sqlite server.v1.sync_tables": "9afd4b379cb5432593aa75ed7e7acb64b1b5132a295fe9e30e7f0c6d550df791",
        "server sqlite server.v2.audit_seal": "dc192d1d430703d1b49accf17e4b642016bd8127c2961c34ea5a18d536668497",
        "server sqlite server.v2.client_owners": "b13bebdd39a713621578a35e85a2d3dc6ea1b9dcf894b261def1d1dc41093b54",
        "server sqlite server.v2.identity": "0287d269a696687bbce950fd292845461761ea15dae8bce80d7c4b9dc4e15444",
        "server sqlite server.v2.rate_windows": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "server sqlite server.v3.audit_details": "ff3bce499f3965a283c9be279fc636e46159ade5354893b3295fe13faedf6821",
        "server sqlite server.v3.erasures_urgent_changes": "8467c01ce5d6d31e6482fca294eef3e7e6489231013933b1c6a508f6b21461f1",
        "server sqlite server.v3.horizons": "f8b7a86bb91da81b4f0b1887525b2e26bcee642f6576eb3690b5e2adee2ab3f6",
        "server sqlite server.v4.push_result_records": "976bb786dec102b6682ed63267110af61c936ccf18b060cd8b30fe9bd07fd683",
        "server sqlite server.v5.change_feed": "326dbfeeecf6ea69d669651f175b36e1f2c5c30203adfeca2a840d6c44234d44",
        "server sqlite server.v6.sinks": "fe1bec336a546654d0609020286f142429a2dd28fed0b0a7206ac162af87d3c0",
        "server sqlite server.v7.device_census": "4af1489a4e4f1debb2b726e64267cb1cc7777d185a7979f83386a2e1c59c064e",
        "server sqlite server.v8.console_sessions": "d5ae34013f09eb4d7a929cf2c5a3acd17e1a48682ba9e05cc8fbdb882e3bc7a4",
        "server sqlite server.v9.device_keys": "2b8aa51d34c371dae3a722cb30f585ef22c69139ebb000678e5b42ae30a95324",
        "server sqlite server.v10.console_session_keys": "c1f18f51fbe6cd6ae4bdae56497a40a26228b8d570db62fc3aefe535d396939e",
        "server sqlite server.v11.subscription_moves": "112ab5788db1fa7456cd74886bc1f768bc26a3dafe0448cef30920c25c01df9f",
        "server sqlite server.v12.files": "76dbf815365f6224cbec069f78530a8b9dc211b25b9ce50eef8dfd79588c3d52",
    ]

    private static var engineMigrations: [(name: String, statements: [String])] {
        let generated = Set(ContractRegistry.serverPostgresMigrations.map(\.identifier))
        return ClientSchema.migrations.map { ("client \($0.identifier)", $0.statements) }
            + LearningStore().migrations.map { ("learning \($0.identifier)", $0.statements) }
            + [("server sqlite server.v1.sync_tables", ServerTables.statements)]
            + ServerUpgrade.all.map { ("server sqlite \($0.identifier)", $0.sqlite) }
            + PostgresMigrator(schema: nil, contracts: ContractCatalog(ContractRegistry.self), logger: Logger(label: "test")).migrations.filter {
                !generated.contains($0.identifier)
            }.map { ("server postgres \($0.identifier)", $0.statements) }
    }

    @Test("every engine migration reads as it was released")
    func unchanged() {
        let migrations = Self.engineMigrations
        for migration in migrations {
            #expect(
                Self.released[migration.name] == Self.checksum(migration.statements),
                "\"\(migration.name)\": \"\(Self.checksum(migration.statements))\",")
        }
        #expect(migrations.count == Self.released.count, "a released migration is gone")
    }
}
