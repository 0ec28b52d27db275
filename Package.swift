// swift-tools-version: 6.1
import PackageDescription

let strictSwift: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Outpost",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "ContractCompiler", targets: ["ContractCompiler"]),
        .library(name: "Contracts", targets: ["Contracts"]),
        .executable(name: "contractc", targets: ["contractc"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // MARK: Contract compiler (depends on nothing of the runtime)
        .systemLibrary(
            name: "CYAML",
            path: "codegen/CYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),
        .target(
            name: "ContractCompiler",
            dependencies: [
                "CYAML",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "codegen/ContractCompiler",
            swiftSettings: strictSwift
        ),
        .executableTarget(
            name: "contractc",
            dependencies: [
                "ContractCompiler",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "codegen/contractc",
            swiftSettings: strictSwift
        ),

        // MARK: Shared runtime code
        .target(
            name: "Contracts",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            path: "Sources/Contracts",
            swiftSettings: strictSwift
        ),

        // MARK: Benchmarks
        .executableTarget(
            name: "outpost-bench",
            dependencies: ["ContractCompiler"],
            path: "bench/OutpostBench",
            swiftSettings: strictSwift
        ),

        // MARK: Tests
        .testTarget(
            name: "ContractCompilerTests",
            dependencies: ["ContractCompiler"],
            path: "Tests/ContractCompilerTests",
            exclude: ["Fixtures"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "ContractsTests",
            dependencies: [
                "Contracts",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Tests/ContractsTests",
            swiftSettings: strictSwift
        ),
    ],
    swiftLanguageModes: [.v6]
)
