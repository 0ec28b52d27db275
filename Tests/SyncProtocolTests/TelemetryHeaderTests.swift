import SyncProtocol
import Testing

/// `X-Outpost-Telemetry` and `X-Outpost-App`: what a device may send, and what the server refuses.
@Suite("Telemetry and app version headers")
struct TelemetryHeaderTests {
    @Test("encode then decode gives the counts back; values are clamped to 0 ... maximum")
    func roundTrip() {
        let counts: [DeviceTelemetry: Int64] = [.syncsOK: 3, .conflicts: 0, .outboxPending: 12, .cacheHits: 2_000_000, .cacheMisses: -4]
        let text = TelemetryHeader.encode(counts)
        #expect(text == "syncs_ok=3,conflicts=0,cache_hits=1000000,cache_misses=0,outbox_pending=12")
        #expect(TelemetryHeader.decode(text) == [.syncsOK: 3, .conflicts: 0, .cacheHits: 1_000_000, .cacheMisses: 0, .outboxPending: 12])
        #expect(TelemetryHeader.decode("") == [:])
    }

    @Test("spaces around names and values and empty pairs are read; unknown names are skipped")
    func lenient() {
        #expect(TelemetryHeader.decode(" syncs_ok = 2 ,, conflicts=1, hologram_views=9") == [.syncsOK: 2, .conflicts: 1])
    }

    @Test(
        "malformed text is refused whole",
        arguments: [
            "syncs_ok", "syncs_ok=", "=3", "syncs_ok=-1", "syncs_ok=+1", "syncs_ok=1.5", "syncs_ok=0x10", "syncs_ok=1000001",
            "syncs_ok=99999999999999999999", "syncs_ok=1,syncs_ok=2", "x=1,x=2", "syncs_ok=١", "syncs_ok=1;conflicts=2",
            "syncs_ok=1," + String(repeating: "a", count: 600) + "=1",
        ])
    func refused(_ text: String) {
        #expect(TelemetryHeader.decode(text) == nil, "\(text.prefix(40))")
    }

    @Test("an app version is 1 to 64 printable ASCII characters")
    func appVersion() {
        #expect(AppVersionHeader.isValid("fieldops-ios/1.4.2 (build 88)"))
        #expect(AppVersionHeader.isValid(String(repeating: "v", count: 64)))
        for bad in ["", String(repeating: "v", count: 65), "app\u{7F}", "app\t1", "app-é", "line\nbreak"] {
            #expect(!AppVersionHeader.isValid(bad), "\(bad)")
        }
    }
}
