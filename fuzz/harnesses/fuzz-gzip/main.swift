import Foundation
import FuzzTargets

/// libFuzzer's entry (`make fuzz`, scripts/fuzz.sh): one input to ``fuzzGzip(_:)``; a violated
/// property traps, so libFuzzer keeps the input as a crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    do {
        try fuzzGzip(Data(bytes: start, count: count))
    } catch {
        fatalError("fuzz-gzip: \(error)")
    }
    return 0
}
