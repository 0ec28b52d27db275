// swift-tools-version: 6.1
import PackageDescription

// The site-inspection app's sync layer, a package of its own on Outpost's public products only,
// as any team's app is: its contracts and their generated module, a server app and the server
// command built on it, a client library, and end-to-end tests with real processes.
let package = Package(
    name: "Inspections",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "InspectionContracts", targets: ["InspectionContracts"]),
        .library(name: "InspectionServer", targets: ["InspectionServer"]),
        .library(name: "InspectionClient", targets: ["InspectionClient"]),
        .executable(name: "inspections-server", targets: ["inspections-server"]),
    ],
    dependencies: [
        // Outpost itself, by path, since this folder lives in its repository. An app elsewhere
        // names it by URL and version: .package(url: "https://…/outpost.git", from: "…").
        .package(name: "Outpost", path: "../..")
    ],
    targets: [
        // GENERATED from contracts/ by `swift package --allow-writing-to-package-directory
        // generate-contracts --output Sources/InspectionContracts`; never edited by hand.
        .target(
            name: "InspectionContracts",
            dependencies: [.product(name: "ContractRuntime", package: "Outpost")]
        ),
        .target(
            name: "InspectionServer",
            dependencies: [
                "InspectionContracts",
                .product(name: "SyncServer", package: "Outpost"),
                .product(name: "SyncProtocol", package: "Outpost"),
                .product(name: "ContractRuntime", package: "Outpost"),
            ]
        ),
        .executableTarget(
            name: "inspections-server",
            dependencies: [
                "InspectionServer", "InspectionContracts",
                .product(name: "SyncServerCommands", package: "Outpost"),
            ]
        ),
        .target(
            name: "InspectionClient",
            dependencies: [
                "InspectionContracts",
                .product(name: "SyncClient", package: "Outpost"),
                .product(name: "ContractRuntime", package: "Outpost"),
            ]
        ),
        .testTarget(
            name: "InspectionTests",
            dependencies: [
                "InspectionClient", "InspectionContracts",
                .product(name: "SyncClient", package: "Outpost"),
                .product(name: "SyncProtocol", package: "Outpost"),
                .product(name: "ContractRuntime", package: "Outpost"),
            ]
        ),
    ]
)

for target in package.targets {
    target.swiftSettings = [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("InternalImportsByDefault")]
}
