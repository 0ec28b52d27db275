import InspectionContracts
import InspectionServer
import SyncServerCommands

// The example's whole server: its contracts and its app; every subcommand, flag and route comes
// with SyncServerCommands.
await SyncServerCommands.main(
    SyncServerProgram(name: "inspections-server", contracts: ContractRegistry.self, apps: [InspectionServerApp()]))
