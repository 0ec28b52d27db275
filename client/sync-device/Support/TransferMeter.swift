import ArgumentParser
import Foundation

/// `--quiet` of the commands that show a transfer's progress.
struct ProgressOptions: ParsableArguments {
    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "Show no progress on standard error (results and errors still print).")
    var quiet = false

    /// A bar redrawn on a terminal, plain lines otherwise, nothing with --quiet.
    var style: ProgressStyle {
        quiet ? .quiet : Console.standardErrorIsTerminal ? .bar : .lines
    }
}

/// How progress is shown on standard error.
enum ProgressStyle {
    /// One line redrawn in place (standard error is a terminal).
    case bar
    /// A line now and then, and one at the end (standard error is a file or a pipe).
    case lines
    /// Nothing.
    case quiet
}

/// The progress of a file's bytes going up or down, on standard error: on a terminal
/// `uploading [#########---------------] 4.2 MB / 16.8 MB  25%  3.1 MB/s`, redrawn as the engine
/// reports bytes; elsewhere `upload: 4.2 MB of 16.8 MB (25%), 3.1 MB/s` at most once a second
/// and once at the end. It only shows what it is told (the engine's status, the bytes the
/// server sent); it never guesses.
final class TransferMeter: @unchecked Sendable {
    private let verb: String
    private let style: ProgressStyle
    private let lock = NSLock()
    private var total: Int64 = 0
    private var done: Int64 = 0
    /// Bytes already there when the transfer started (a resumed one): not counted in the rate.
    private var resumedFrom: Int64 = 0
    private var started: Date?
    private var lastLine: Date?
    private var printedEnd = false
    private var drawn = false

    /// `verb`: `upload` or `download`.
    init(_ verb: String, style: ProgressStyle) {
        self.verb = verb
        self.style = style
    }

    /// A transfer of `total` bytes, `done` of them already there.
    func begin(total: Int64, done: Int64 = 0) {
        lock.withLock {
            self.total = total
            self.done = done
            resumedFrom = done
            started = Date()
            lastLine = nil
            printedEnd = false
        }
        show(force: false)
    }

    /// Whether a transfer was begun (and not finished).
    var isActive: Bool { lock.withLock { started != nil } }

    /// The transfer stands at `done` bytes of `total`.
    func set(done: Int64, total: Int64) {
        let changed = lock.withLock {
            if started == nil {
                started = Date()
                resumedFrom = 0
            }
            let changed = self.done != done || self.total != max(total, done)
            self.total = max(total, done)
            self.done = done
            return changed
        }
        // The same figures again (a status about the push after the upload): nothing to redraw.
        if changed { show(force: false) }
    }

    /// `bytes` more arrived.
    func add(_ bytes: Int64) {
        lock.withLock {
            if started == nil { started = Date() }
            done += bytes
            total = max(total, done)
        }
        show(force: false)
    }

    /// The transfer ended: the bar is cleared; in lines mode its last figures are printed once.
    func finish() {
        let (wasActive, wasDrawn) = lock.withLock { (started != nil, drawn) }
        guard wasActive else { return }
        if style == .lines { show(force: true) }
        if style == .bar, wasDrawn { Console.redraw("") }
        lock.withLock {
            started = nil
            drawn = false
        }
    }

    private func show(force: Bool) {
        guard style != .quiet else { return }
        let now = Date()
        let text: String? = lock.withLock {
            guard let started else { return nil }
            let elapsed = now.timeIntervalSince(started)
            let rate = elapsed > 0.01 ? Double(done - resumedFrom) / elapsed : nil
            let percent = total > 0 ? Int(done * 100 / total) : 100
            let rateText = rate.map { Wording.bytes(Int64($0)) + "/s" } ?? "—"
            switch style {
            case .bar:
                drawn = true
                let width = 24
                let filled = total > 0 ? Int(done * Int64(width) / total) : width
                let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
                return "\(verb)ing [\(bar)] \(Wording.bytes(done)) / \(Wording.bytes(total))  \(percent)%  \(rateText)"
            case .lines:
                let atEnd = done >= total
                if atEnd && printedEnd { return nil }
                if !force && !atEnd, let lastLine, now.timeIntervalSince(lastLine) < 1 { return nil }
                if !force && !atEnd && lastLine == nil && done == resumedFrom { return nil }
                lastLine = now
                if atEnd { printedEnd = true }
                return "\(verb): \(Wording.bytes(done)) of \(Wording.bytes(total)) (\(percent)%), \(rateText)"
            case .quiet:
                return nil
            }
        }
        guard let text else { return }
        if style == .bar { Console.redraw(text) } else { Console.note(text) }
    }
}
