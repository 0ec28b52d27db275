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
        .library(name: "ContractRuntime", targets: ["ContractRuntime"]),
        .library(name: "Contracts", targets: ["Contracts"]),
        .library(name: "SyncProtocol", targets: ["SyncProtocol"]),
        .library(name: "SyncClient", targets: ["SyncClient"]),
        .library(name: "SyncClientNIO", targets: ["SyncClientNIO"]),
        .library(name: "SyncServer", targets: ["SyncServer"]),
        .executable(name: "sync-server", targets: ["sync-server"]),
        .library(name: "SyncServerCommands", targets: ["SyncServerCommands"]),
        .executable(name: "sync-device", targets: ["sync-device"]),
        .executable(name: "contractc", targets: ["contractc"]),
        .plugin(name: "GenerateContracts", targets: ["GenerateContracts"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.34.1"),
        // TLS: the server's certificate (through Hummingbird) and the client's pinned connections.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // The pinned client's validation of the server's chain (SyncClientNIO).
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // The sinks' deliveries (webhooks, a learning record store): pooled connections, timeouts, TLS.
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // The operator console's pages (server-rendered HTML).
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        // Latency percentiles of the load and live benchmarks (outpost-bench only).
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", exact: "0.2.0"),
        // `make docs` only (the generate-documentation command plugin); no target depends on it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // MARK: Contract compiler (shares the runtime's vocabulary: field kinds, policies, scopes)
        .systemLibrary(
            name: "CYAML",
            path: "codegen/CYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),
        .target(
            name: "ContractCompiler",
            dependencies: [
                "CYAML", "ContractRuntime",
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

        // MARK: Contract runtime (what generated code imports) and the generated contracts
        .target(
            name: "ContractRuntime",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            path: "Sources/ContractRuntime",
            swiftSettings: strictSwift
        ),
        // Column values bound and read by GRDB as they are, for the device's store and the
        // server's SQLite storage.
        .target(
            name: "ContractRuntimeGRDB",
            dependencies: ["ContractRuntime", .product(name: "GRDB", package: "GRDB.swift")],
            path: "Sources/ContractRuntimeGRDB",
            swiftSettings: strictSwift
        ),
        .target(
            name: "Contracts",
            dependencies: ["ContractRuntime"],
            path: "Sources/Contracts",
            swiftSettings: strictSwift
        ),

        // The wire protocol, and the one gzip (through the system zlib) of the devices' and the
        // server's bodies.
        .target(
            name: "SyncProtocol",
            dependencies: ["ContractRuntime", "CZlib"],
            path: "Sources/SyncProtocol",
            swiftSettings: strictSwift
        ),
        // The learning app's own HTTP API (the units sync route), shared by its server and client sides.
        .target(
            name: "LearningAPI",
            dependencies: ["ContractRuntime", "Contracts"],
            path: "Sources/LearningAPI",
            swiftSettings: strictSwift
        ),

        // MARK: Client
        .target(
            name: "SyncClient",
            dependencies: [
                "ContractRuntime", "ContractRuntimeGRDB", "SyncProtocol",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                // PBKDF2, for PassphraseKeyProvider.
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                // The device's own counts (SyncTelemetry), for the app's metrics backend.
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            path: "client/SyncClient",
            swiftSettings: strictSwift
        ),

        // Public-key pinning where URLSession cannot pin (Linux): HTTPS over SwiftNIO for
        // URLSessionTransport. Its own target, so SyncClient stays free of NIO for the apps.
        .target(
            name: "SyncClientNIO",
            dependencies: [
                "SyncClient",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                // HTTPClientExchange: pooled connections that wait on the event loop (Linux's
                // URLSession spins while it waits for an answer).
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "client/SyncClientNIO",
            swiftSettings: strictSwift
        ),

        // The learning app's client side (units for offline use, their asset files, assessments),
        // on the store's public API only: its tables are a store extension.
        .target(
            name: "LearningClient",
            dependencies: [
                "SyncClient", "ContractRuntime", "Contracts", "SyncProtocol", "LearningAPI",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "client/LearningClient",
            swiftSettings: strictSwift
        ),

        // The field operations app's client side, on the store's public API only.
        .target(
            name: "FieldOpsClient",
            dependencies: ["SyncClient", "Contracts"],
            path: "client/FieldOpsClient",
            swiftSettings: strictSwift
        ),

        .executableTarget(
            name: "sync-device",
            dependencies: [
                "SyncClient", "SyncClientNIO", "LearningClient", "FieldOpsClient", "ContractRuntime", "Contracts", "SyncProtocol", "LearningAPI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "client/sync-device",
            swiftSettings: strictSwift
        ),

        // MARK: Server
        .systemLibrary(
            name: "CZlib",
            path: "server/CZlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .target(
            name: "SyncServer",
            dependencies: [
                "ContractRuntime", "ContractRuntimeGRDB", "SyncProtocol", "CZlib",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // The end of a TLS handshake (TLSUserEvent), for the handshake deadline.
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // The file blob store's disk work, on NIO's thread pool rather than the tasks' threads.
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            path: "server/SyncServer",
            swiftSettings: strictSwift
        ),
        // The sample apps' server sides, on the engine's extension points only.
        .target(
            name: "LearningServer",
            dependencies: [
                "SyncServer", "ContractRuntime", "Contracts", "SyncProtocol", "LearningAPI",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                // The name-based UUIDs of xAPI statements (SHA-1).
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "server/LearningServer",
            swiftSettings: strictSwift
        ),
        .target(
            name: "FieldOpsServer",
            dependencies: ["SyncServer", "ContractRuntime", "Contracts", "SyncProtocol"],
            path: "server/FieldOpsServer",
            swiftSettings: strictSwift
        ),
        // Both sample apps together, and their sample data: what sync-server and the tests run.
        .target(
            name: "SampleServerApps",
            dependencies: ["SyncServer", "LearningServer", "LearningAPI", "FieldOpsServer", "ContractRuntime", "Contracts"],
            path: "server/SampleServerApps",
            swiftSettings: strictSwift
        ),
        // The sync-server command for any team's contracts and apps: an adopter's main is a few lines.
        .target(
            name: "SyncServerCommands",
            dependencies: [
                "SyncServer", "ContractRuntime", "SyncProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "server/SyncServerCommands",
            swiftSettings: strictSwift
        ),
        // The sample's server: SyncServerCommands with the sample's contracts, apps and content.
        .executableTarget(
            name: "sync-server",
            dependencies: ["SyncServerCommands", "SyncServer", "SampleServerApps", "Contracts"],
            path: "server/sync-server",
            swiftSettings: strictSwift
        ),

        // `swift package generate-contracts`: contractc in SwiftPM's workflow, for any package.
        .plugin(
            name: "GenerateContracts",
            capability: .command(
                intent: .custom(verb: "generate-contracts", description: "Generate the contract module's Swift from the contracts folder with contractc"),
                permissions: [.writeToPackageDirectory(reason: "contractc writes the generated module and the contracts' JSON Schema")]
            ),
            dependencies: ["contractc"],
            path: "Plugins/GenerateContracts"
        ),

        // MARK: Benchmarks
        .executableTarget(
            name: "outpost-bench",
            dependencies: [
                "ContractCompiler", "SyncServer", "SampleServerApps", "LearningServer", "LearningAPI", "SyncClient", "SyncClientNIO", "LearningClient", "FieldOpsClient", "SyncProtocol", "ContractRuntime", "ContractRuntimeGRDB", "Contracts", "CZlib",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "bench/OutpostBench",
            swiftSettings: strictSwift
        ),

        // MARK: Fuzzing (`make fuzz`): one entry per parser of outside bytes, shared by the
        // libFuzzer harnesses (declared below, only when building them) and FuzzRegressionTests.
        .target(
            name: "FuzzTargets",
            dependencies: [
                "ContractCompiler", "SyncServer", "SampleServerApps", "LearningServer", "LearningAPI", "SyncClient", "LearningClient", "FieldOpsClient", "SyncProtocol", "ContractRuntime", "Contracts",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "fuzz/FuzzTargets",
            swiftSettings: strictSwift
        ),

        // MARK: Tests
        // What several test targets share: running the built executables (a real sync-server on
        // a loopback port among them), a server in the test's own process, temporary folders, the
        // storages the suites run on. Not on the sample apps' contracts.
        .target(
            name: "OutpostTestSupport",
            dependencies: [
                "SyncServer", "SyncProtocol", "ContractRuntime",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            path: "Tests/Support",
            // The engines' own contract set is a module of its own (EngineTestContracts).
            exclude: ["EngineContracts"],
            // Unoptimized in release too: Swift 6.3's optimizer crashes (signal 11 in LLVM's
            // coroutine splitting, emitSetAndGetSwiftErrorValueAround) on StorageKind's async
            // throwing factories, which kept `swift build -c release` and `make sim` from
            // building. Test support gains nothing from optimization.
            swiftSettings: strictSwift + [.unsafeFlags(["-Onone"], .when(configuration: .release))]
        ),
        // The engines' own contracts (Tests/Support/EngineContracts/contracts), generated like
        // any contract set: the engine suites test through these, never through the sample's.
        .target(
            name: "EngineTestContracts",
            dependencies: ["ContractRuntime"],
            path: "Tests/Support/EngineContracts/Sources",
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "SyncClientTests",
            dependencies: [
                "OutpostTestSupport", "EngineTestContracts",
                "SyncClient", "SyncClientNIO", "LearningClient", "FieldOpsClient", "SyncProtocol", "ContractRuntime", "Contracts", "SyncServer", "SampleServerApps", "LearningServer", "LearningAPI",
                .product(name: "GRDB", package: "GRDB.swift"),
                // A front that refuses compressed pushes (CompressedPushTests).
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            path: "Tests/SyncClientTests",
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "OutpostTestSupport",
                "SyncServer", "SampleServerApps", "LearningServer", "LearningAPI", "SyncClient", "LearningClient", "FieldOpsClient", "SyncProtocol", "ContractRuntime", "Contracts",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The SHA-256 of the files the crash suite sends.
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/EndToEndTests",
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "ContractCompilerTests",
            dependencies: [
                "OutpostTestSupport", "ContractCompiler", "ContractRuntime",
                // A census route on loopback for `contractc check --fleet-url`.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            path: "Tests/ContractCompilerTests",
            exclude: ["Fixtures"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "SyncProtocolTests",
            dependencies: ["SyncProtocol", "LearningAPI", "ContractRuntime", "Contracts"],
            path: "Tests/SyncProtocolTests",
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "SyncServerTests",
            dependencies: [
                "OutpostTestSupport", "EngineTestContracts",
                "SyncServer", "SampleServerApps", "LearningServer", "FieldOpsServer", "LearningAPI", "SyncClient", "LearningClient", "FieldOpsClient", "SyncProtocol", "ContractRuntime", "Contracts", "CZlib",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Tests/SyncServerTests",
            swiftSettings: strictSwift
        ),
        // The whole system in one process on a simulated clock and network, seeded (`make sim`).
        .testTarget(
            name: "SimulationTests",
            dependencies: [
                "SyncServer", "SampleServerApps", "LearningServer", "LearningAPI", "SyncClient", "LearningClient", "FieldOpsClient", "SyncProtocol", "ContractRuntime", "Contracts",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/SimulationTests",
            // Read from the source folder by path (the shrunk schedules of past failures).
            exclude: ["Regressions"],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "FuzzRegressionTests",
            dependencies: ["FuzzTargets"],
            path: "Tests/FuzzRegressionTests",
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "ContractsTests",
            dependencies: [
                "OutpostTestSupport", "ContractRuntime", "Contracts",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Tests/ContractsTests",
            swiftSettings: strictSwift
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The libFuzzer harnesses, one executable per FuzzTarget, built only by scripts/fuzz.sh
// (OUTPOST_FUZZ=1, with -sanitize=fuzzer): without the sanitizer they have no main to link.
if Context.environment["OUTPOST_FUZZ"] != nil {
    for name in ["contract", "contract-set", "push", "gzip", "json", "pull-page", "cursor", "schema-header", "token", "range"] {
        package.targets.append(
            .executableTarget(name: "fuzz-\(name)", dependencies: ["FuzzTargets"], path: "fuzz/harnesses/fuzz-\(name)", swiftSettings: strictSwift)
        )
    }
}
