import Foundation

/// Finds a shorter schedule that fails the same invariant: removes runs of steps, halving their
/// length down to single steps (delta debugging), then turns off the network faults of the
/// syncs that remain. Each candidate is a whole new run, so the search is bounded by `budget`.
enum Shrinker {
    struct Result {
        var schedule: SimSchedule
        var outcome: SimOutcome
        var runs: Int
    }

    static func shrink(_ schedule: SimSchedule, failing original: SimOutcome, sabotage: SimSabotage? = nil, budget: Int = 150) async -> Result {
        guard let invariant = original.failure?.invariant else { return Result(schedule: schedule, outcome: original, runs: 0) }
        var best = Result(schedule: schedule, outcome: original, runs: 0)

        func attempt(_ candidate: SimSchedule) async -> Bool {
            best.runs += 1
            let outcome = await Simulation.run(candidate, sabotage: sabotage)
            guard outcome.failure?.invariant == invariant else { return false }
            best.schedule = candidate
            best.outcome = outcome
            return true
        }

        // Steps after the failing one cannot matter to it.
        if let step = original.failure?.step, step + 1 < schedule.steps.count {
            var candidate = schedule
            candidate.steps.removeSubrange((step + 1)...)
            _ = await attempt(candidate)
        }
        var chunk = max(1, best.schedule.steps.count / 2)
        while best.runs < budget {
            var start = 0
            var removedAny = false
            while start < best.schedule.steps.count, best.runs < budget {
                var candidate = best.schedule
                candidate.steps.removeSubrange(start..<min(start + chunk, candidate.steps.count))
                if await attempt(candidate) { removedAny = true } else { start += chunk }
            }
            if chunk == 1 && !removedAny { break }
            if !removedAny { chunk = max(1, chunk / 2) }
        }
        for index in best.schedule.steps.indices where best.runs < budget {
            guard let simpler = best.schedule.steps[index].withoutFaults else { continue }
            var candidate = best.schedule
            candidate.steps[index] = simpler
            _ = await attempt(candidate)
        }
        return best
    }
}
