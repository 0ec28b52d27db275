import ArgumentParser
import ContractRuntime
import Contracts
import Foundation
import LearningClient
import SyncClient

struct UnitsCommand: DeviceCommand {
    static let configuration = CommandConfiguration(
        commandName: "units",
        abstract: "The units of lessons on the device (fetched once when none is cached and the device is online), and which are downloaded."
    )

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func execute() async throws {
        let session = try device.session()
        switch try await session.store.units(from: LearningContent(session: session).fetcher) {
        case .cached, .fetched: break
        case .offline:
            throw DeviceFailure.network("no unit is cached and the device is offline", hint: "sync once online to download the content")
        case .unavailable(let reason):
            throw DeviceFailure.network("no unit is cached and the server could not provide them: \(reason)")
        }
        let summaries = try session.store.unitSummaries()
        if output.json {
            Console.json(
                .object([
                    "units": .array(
                        summaries.map { summary in
                            .object([
                                "unit": .object(Wire.object(summary.unit)), "local": .object(Wire.object(summary.local)),
                                "lesson_count": .int(Int64(summary.lessonCount)),
                            ])
                        })
                ]))
            return
        }
        for summary in summaries {
            let unit = summary.unit
            let minutes = unit.estimatedMinutes.map { ", \($0) min" } ?? ""
            let opened = summary.local.lastAccessedAt.map { ", opened \(Wording.age(of: $0.date, now: session.clock.now()))" } ?? ""
            let offline = summary.local.downloadStatus == .none ? "" : ", \(summary.local.downloadStatus.rawValue)"
            Console.say(
                "\(unit.id)  \(unit.title)  "
                    + "(\(unit.learnerLevel.rawValue), \(Wording.count(summary.lessonCount, "lesson"))\(minutes)\(opened)\(offline))"
            )
        }
    }
}
