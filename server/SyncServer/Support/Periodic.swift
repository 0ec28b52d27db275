/// Runs `body` every `interval` until the calling task is cancelled: first at once
/// (`startingNow`), or first when one interval has passed. One loop for the server's periodic
/// jobs (housekeeping, audit verification), so each stops the same way when `serve` ends.
package func repeatEvery(_ interval: Duration, startingNow: Bool, _ body: () async -> Void) async {
    if !startingNow {
        do { try await Task.sleep(for: interval) } catch { return }
    }
    while !Task.isCancelled {
        await body()
        do { try await Task.sleep(for: interval) } catch { return }
    }
}
