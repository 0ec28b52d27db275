import Foundation
import FuzzTargets

/// libFuzzer's entry (`make fuzz`, scripts/fuzz.sh): one input to ``fuzzContractSet(_:)``; a violated
/// property traps, so libFuzzer keeps the input as a crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    do {
        try fuzzContractSet(Data(bytes: start, count: count))
    } catch {
        fatalError("fuzz-contract-set: \(error)")
    }
    return 0
}
