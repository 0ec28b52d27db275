import ContractRuntime
import Contracts
import Foundation
import OutpostTestSupport
import SyncProtocol
import Testing

@testable import SampleServerApps
@testable import SyncServer

@Suite("Sample content seed", .blockingWork)
struct SeedTests {
    @Test("seeding loads units, lessons, real files, an assessment and a team's field work", arguments: StorageKind.allCases)
    func seeds(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        let summary = try await SampleContent.seed(
            storage: harness.storage, tenant: "acme", team: "t-1", clock: harness.clock)
        #expect(
            summary.rows == [
                "Unit": 2, "Lesson": 5, "Asset": 5, "Assessment": 1, "ServiceAsset": 2, "Task": 3, "Incident": 1,
            ])
        #expect(summary.written == 19 && summary.unchanged == 0)
        #expect(summary.assetFiles == 5)
        #expect(summary.description.contains("19 rows written"))

        // Every row is valid for its generated DTO.
        let device = PullHarness.device("u-1", tenant: "acme", teams: ["t-1"])
        let content = try await harness.pullAll("content", as: device)
        let team = try await harness.pullAll("team", as: device)
        for page in content + team {
            for (name, rows) in page.upserts {
                let type = try #require(ContractRegistry.entityTypes.first { $0.descriptor.name == name })
                for row in rows {
                    _ = try JSONDecoder().decode(type, from: JSONEncoder().encode(row))
                }
            }
        }
        #expect(content.flatMap { $0.upserts["Assessment"] ?? [] }.count == 1)
        #expect(team.flatMap { $0.upserts["Task"] ?? [] }.count == 3)
    }

    @Test("the asset files are real and their SHA-256 and size match the Asset rows", arguments: StorageKind.allCases)
    func assetFiles(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        _ = try await SampleContent.seed(storage: harness.storage, tenant: "acme", team: "t-1", clock: harness.clock)
        let rows = try await harness.storage.read { reader in
            try await reader.rows(in: ContractTable(ContractRegistry.asset), tenant: "acme", where: [:], limit: 100)
        }
        #expect(rows.count == 5)
        var signatures: [String: Data] = [:]
        for row in rows {
            let checksum = try #require(row.text("checksum"))
            let bytes = try #require(try await harness.storage.storedFile(tenant: "acme", sha256: checksum))
            #expect(Hex.sha256(bytes) == checksum)
            #expect(Int64(bytes.count) == row.integer("size_bytes"))
            #expect(row.text("storage_key") == checksum)
            // Version 2's `file` names the same file.
            let text = try #require(row.text("file"))
            let file = try FileReference(json: try #require(JSONParser.parse(text)))
            #expect(file.sha256 == checksum && file.byteCount == row.integer("size_bytes") && file.name == row.text("id"))
            signatures[row.text("content_type") ?? ""] = bytes.prefix(8)
        }
        #expect(signatures["image/png"] == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
        #expect(signatures["audio/wav"]?.prefix(4) == Data("RIFF".utf8))
        #expect(signatures["image/svg+xml"].map { String(decoding: $0, as: UTF8.self) } == "<svg xml")
        #expect(signatures["text/markdown"]?.first == UInt8(ascii: "#"))

        // The PNG is well formed: each chunk's CRC holds and the image data inflates to 24 rows.
        let png = try #require(try await harness.storage.storedFile(tenant: "acme", sha256: Hex.sha256(SampleFiles.batteryIconPNG())))
        let chunks = try Self.pngChunks(png)
        #expect(chunks.map(\.type) == ["IHDR", "IDAT", "IEND"])
        #expect(chunks.allSatisfy { $0.crcHolds })
        let pixels = try Self.inflateStored(chunks[1].data)
        #expect(pixels.count == 24 * (1 + 24 * 3))
        // The WAV header says what its data holds: 1.5 s of 8 kHz 8-bit mono.
        let wav = SampleFiles.briefingWAV(milliseconds: 1500)
        #expect(wav.count == 44 + 12_000)
        #expect(wav[36..<40] == Data("data".utf8))
    }

    @Test("seeding twice changes nothing: no new sequence numbers, audit entries or files", arguments: StorageKind.allCases)
    func idempotent(_ kind: StorageKind) async throws {
        let harness = try await PullHarness(kind)
        defer { harness.remove() }
        let first = try await SampleContent.seed(storage: harness.storage, tenant: "acme", team: "t-1", clock: harness.clock)
        func snapshot() async throws -> (content: Int64, team: Int64, audit: Int, files: [String]) {
            let (content, team, audit) = try await harness.storage.read { reader in
                (
                    try await reader.scopeSequence(tenant: "acme", scopeKey: "content:global"),
                    try await reader.scopeSequence(tenant: "acme", scopeKey: "ops:team:t-1"),
                    try await reader.auditEntries(after: 0, limit: 1000).count
                )
            }
            return (content, team, audit, try await harness.storage.storedFileHashes(tenant: "acme"))
        }
        let before = try await snapshot()
        // 19 rows and the 5 files stored.
        #expect(before.content == 13 && before.team == 6 && before.audit == 24 && before.files.count == 5)

        let second = try await SampleContent.seed(storage: harness.storage, tenant: "acme", team: "t-1", clock: harness.clock)
        #expect(second.written == 0 && second.unchanged == first.written)
        let after = try await snapshot()
        #expect(after.content == before.content && after.team == before.team && after.audit == before.audit)
        #expect(after.files == before.files)
        #expect(try await AuditChain.verify(harness.storage) == .intact(entries: 24, keyedFrom: 1))

        // Another team in the same tenant gets its own field work; content is shared and unchanged.
        let other = try await SampleContent.seed(storage: harness.storage, tenant: "acme", team: "t-2", clock: harness.clock)
        #expect(other.written == 6)
        let content = try await harness.storage.read { reader in try await reader.scopeSequence(tenant: "acme", scopeKey: "content:global") }
        #expect(content == before.content)
    }

    static func crc32(_ bytes: Data) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    static func bigEndian(_ bytes: Data) -> UInt32 { bytes.reduce(0) { $0 << 8 | UInt32($1) } }

    struct Malformed: Error {}

    /// The chunks of a PNG, with whether each one's CRC holds.
    static func pngChunks(_ png: Data) throws -> [(type: String, data: Data, crcHolds: Bool)] {
        let bytes = Data(png)
        guard bytes.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { throw Malformed() }
        var chunks: [(type: String, data: Data, crcHolds: Bool)] = []
        var offset = 8
        while offset + 12 <= bytes.count {
            let length = Int(bigEndian(bytes[offset..<(offset + 4)]))
            guard offset + 12 + length <= bytes.count else { throw Malformed() }
            let typed = bytes[(offset + 4)..<(offset + 8 + length)]
            let crc = bigEndian(bytes[(offset + 8 + length)..<(offset + 12 + length)])
            chunks.append((String(decoding: typed.prefix(4), as: UTF8.self), Data(typed.dropFirst(4)), crc32(Data(typed)) == crc))
            offset += 12 + length
        }
        return chunks
    }

    /// The data of a zlib stream made of stored deflate blocks, its Adler-32 checked.
    static func inflateStored(_ stream: Data) throws -> Data {
        let bytes = [UInt8](stream)
        guard bytes.count >= 6, (UInt16(bytes[0]) << 8 | UInt16(bytes[1])) % 31 == 0 else { throw Malformed() }
        var output: [UInt8] = []
        var offset = 2
        var final = false
        while !final {
            guard offset + 5 <= bytes.count, bytes[offset] & 0b110 == 0 else { throw Malformed() }
            final = bytes[offset] & 1 == 1
            let length = Int(bytes[offset + 1]) | Int(bytes[offset + 2]) << 8
            let complement = Int(bytes[offset + 3]) | Int(bytes[offset + 4]) << 8
            guard length ^ 0xFFFF == complement, offset + 5 + length <= bytes.count else { throw Malformed() }
            output += bytes[(offset + 5)..<(offset + 5 + length)]
            offset += 5 + length
        }
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in output {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        guard offset + 4 == bytes.count, bigEndian(Data(bytes[offset...])) == b << 16 | a else { throw Malformed() }
        return Data(output)
    }

    @Test("the sample files are the same bytes on every run")
    func deterministicFiles() {
        #expect(SampleFiles.batteryIconPNG() == SampleFiles.batteryIconPNG())
        #expect(
            Hex.sha256(SampleFiles.briefingWAV(milliseconds: 1500))
                == Hex.sha256(SampleFiles.briefingWAV(milliseconds: 1500)))
        let first = SampleContent.sampleAssets().map { Hex.sha256($0.data) }
        #expect(first == SampleContent.sampleAssets().map { Hex.sha256($0.data) })
        #expect(Set(first).count == first.count)
    }
}
