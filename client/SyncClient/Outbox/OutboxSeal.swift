import Foundation
import GRDB
import SyncProtocol

/// Seals the outbox's delivery state, so that no entry can be lost without the store noticing.
///
/// Each entry's content is signed when it is written (``OutboxRecord/macFields``); this adds a
/// *state* MAC per entry over its place in the sequence (`seq`, `push_seq`), its status and its
/// content MAC, and a sealed head over how many entries the outbox holds and the XOR of their
/// state MACs. Every write transaction of the store checks both before it runs and seals what it
/// changed before it commits (``OfflineStore/write(_:)``), so:
///
/// - an entry marked `done` (or any status changed), or two entries' `seq`s swapped, by writing
///   the database directly is found by its state MAC: it is quarantined (never sent, kept, visible
///   with code `outbox_tampered`);
/// - an entry deleted (or added) behind the store's back changes the head: the store records an
///   integrity problem the app sees (``OfflineStore/outboxIntegrityProblem()``), naming how many
///   entries went missing.
///
/// The check reads the outbox's small state columns once per write transaction: cheap for the
/// hundreds of entries an offline device queues, linear in the outbox's size.
enum OutboxSeal {
    struct StateRow: Equatable {
        var seq: Int64
        var clientMutationId: String
        var status: String
        var pushSeq: Int64?
        var hmac: Data
        var stateMAC: Data?

        /// A row of ``OutboxSeal/rows(_:)``, read by position (its columns in that order): by
        /// name, each read looked the column up again, and every write reads every entry.
        init(_ row: Row) {
            seq = row[0]
            clientMutationId = row[1]
            status = row[2]
            pushSeq = row[3]
            hmac = row[4] ?? Data()
            stateMAC = row[5]
        }

        var fields: [Data] {
            [
                Data("outpost.outbox.state.v1".utf8), Data(String(seq).utf8), Data(clientMutationId.utf8), Data(status.utf8),
                Data((pushSeq.map(String.init) ?? "").utf8), hmac,
            ]
        }
    }

    /// The sealed head as stored in `metadata`: `count:xor:mac`, the last two in base64.
    struct Head: Equatable {
        var count: Int
        var xor: Data

        func text(_ crypto: StoreCrypto) -> String {
            "\(count):\(xor.base64EncodedString()):\(crypto.mac(fields).base64EncodedString())"
        }

        var fields: [Data] { [Data("outpost.outbox.head.v1".utf8), Data(String(count).utf8), xor] }

        /// The head a stored text names, when its MAC holds.
        static func verified(_ text: String, _ crypto: StoreCrypto) -> Head? {
            let parts = text.split(separator: ":").map(String.init)
            guard parts.count == 3, let count = Int(parts[0]), let xor = Data(base64Encoded: parts[1]), let mac = Data(base64Encoded: parts[2])
            else { return nil }
            let head = Head(count: count, xor: xor)
            return crypto.isValidMAC(mac, for: head.fields) ? head : nil
        }
    }

    /// The entries' states whose state MAC this store verified or made under its current key,
    /// by `seq` (the last one of each entry): an entry read again exactly as it was needs no
    /// second HMAC. Without it every write transaction recomputed one HMAC per entry twice, so
    /// queuing `n` writes offline cost O(n²) HMACs (a device writing 1 000 rows paid some two
    /// million, seconds of CPU; minutes in a debug build). What it remembers is a fact about
    /// the MAC (`state_mac` is the MAC of these fields under this key), true whatever the
    /// database holds: a rolled-back transaction leaves nothing wrong in it. A state changed
    /// outside the store differs from the one remembered and is checked in full, as before.
    final class Memo: Sendable {
        private struct State {
            var keyVersion: Int?
            var rows: [Int64: StateRow] = [:]
        }

        private let state = Locked(State())

        /// Whether `row` is exactly the state last verified or sealed for its `seq` under key `version`.
        func holds(_ row: StateRow, keyVersion version: Int) -> Bool {
            state.withLock { $0.keyVersion == version && $0.rows[row.seq] == row }
        }

        /// Remembers `rows` (their state MACs made under key `version`) as the outbox's entries.
        func replace(with rows: [StateRow], keyVersion version: Int) {
            var bySeq: [Int64: StateRow] = [:]
            bySeq.reserveCapacity(rows.count)
            for row in rows { bySeq[row.seq] = row }
            state.withLock { $0 = State(keyVersion: version, rows: bySeq) }
        }
    }

    static func rows(_ db: Database) throws -> [StateRow] {
        // Cached: every write transaction of the store reads it twice.
        try Row.fetchAll(db.cachedStatement(sql: #"SELECT "seq", "client_mutation_id", "status", "push_seq", "hmac", "state_mac" FROM "outbox""#))
            .map(StateRow.init)
    }

    static func xor(_ macs: [Data]) -> Data {
        var result = [UInt8](repeating: 0, count: 32)
        for mac in macs where mac.count == 32 {
            for (index, byte) in mac.enumerated() { result[index] ^= byte }
        }
        return Data(result)
    }

    /// Checks the outbox against its seal; quarantines entries changed outside the store and
    /// records a missing or added entry as an integrity problem. A store without a seal yet
    /// (new, or upgraded from before seals) is sealed as it is.
    /// - Returns: the entries quarantined.
    @discardableResult
    static func check(
        _ db: Database, crypto: StoreCrypto, memo: Memo? = nil, quarantine: (Database, Int64, String) throws -> Void
    ) throws -> [Int64] {
        let rows = try rows(db)
        guard let text = try Metadata.get(db, .outboxSeal) else {
            try seal(db, crypto: crypto, memo: memo, rows: rows)
            return []
        }
        let keyVersion = crypto.currentVersion
        var tampered: [Int64] = []
        for row in rows where memo?.holds(row, keyVersion: keyVersion) != true {
            if row.stateMAC.map({ !crypto.isValidMAC($0, for: row.fields) }) ?? true { tampered.append(row.seq) }
        }
        for seq in tampered {
            try quarantine(db, seq, "its status or place in the outbox was changed outside the store")
        }
        let head = Head.verified(text, crypto)
        let stored = Head(count: rows.count, xor: xor(rows.compactMap(\.stateMAC)))
        if head == nil || head != stored, tampered.isEmpty || head?.count != rows.count {
            let missing = head.map { $0.count - rows.count } ?? 0
            let problem: String
            if head == nil {
                problem = "the outbox's seal was rewritten outside the store"
            } else if missing > 0 {
                problem =
                    "\(missing) outbox \(missing == 1 ? "entry was" : "entries were") removed outside the store; their writes were never confirmed by the server"
            } else if missing < 0 {
                problem = "\(-missing) outbox \(missing == -1 ? "entry was" : "entries were") added outside the store"
            } else {
                problem = "the outbox was changed outside the store"
            }
            try Metadata.set(db, .outboxIntegrity, problem)
        }
        return tampered
    }

    /// Stamps every entry whose state changed (or is new) and writes the head.
    static func seal(_ db: Database, crypto: StoreCrypto, memo: Memo? = nil, rows: [StateRow]? = nil) throws {
        let keyVersion = crypto.currentVersion
        var macs: [Data] = []
        var sealed: [StateRow] = []
        for var row in try rows ?? self.rows(db) {
            // A state sealed or verified before, unchanged: its MAC is the one it has.
            let mac = memo?.holds(row, keyVersion: keyVersion) == true ? row.stateMAC ?? crypto.mac(row.fields) : crypto.mac(row.fields)
            if row.stateMAC != mac {
                try db.cachedStatement(sql: #"UPDATE "outbox" SET "state_mac" = ? WHERE "seq" = ?"#).execute(arguments: [mac, row.seq])
                row.stateMAC = mac
            }
            macs.append(mac)
            sealed.append(row)
        }
        memo?.replace(with: sealed, keyVersion: keyVersion)
        // Written only when it changed: most write transactions leave the outbox as it was.
        let head = Head(count: macs.count, xor: xor(macs)).text(crypto)
        if try Metadata.get(db, .outboxSeal) != head { try Metadata.set(db, .outboxSeal, head) }
    }
}
