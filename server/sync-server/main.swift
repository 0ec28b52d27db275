import Contracts
import SampleServerApps
import SyncServer
import SyncServerCommands

// The sample's server: its contracts, its two apps, and its sample content.
await SyncServerCommands.main(
    SyncServerProgram(
        contracts: ContractRegistry.self, apps: SampleServerApps.all,
        seed: { storage, tenant, team in
            try await SampleContent.seed(storage: storage, tenant: tenant, team: team, clock: SystemClock()).description
        },
        preparation: { storage, files, dataFolder in
            // Asset files an older server kept in its own folder become files of their tenants.
            let upgrade = try await SampleContentService(storage: storage, fileLimits: files)
                .upgradeStoredAssets(from: dataFolder.appendingPathComponent("assets", isDirectory: true))
            guard upgrade.upgraded > 0 || upgrade.missing > 0 else { return nil }
            return "asset files moved into the files: \(upgrade.upgraded) asset(s); \(upgrade.missing) name a file the old folder lacks"
        }
    ))
