import CoreMetrics

/// `outpost_audit_verifications_total{outcome}`: verifications of the audit chain this process
/// ran (``AuditChain/verify(_:key:checkpoint:pageSize:)``), `ok` or `broken`. The alert
/// `OutpostAuditChainBroken` (docs/alerts) fires on the first `broken` one.
extension ServerMetrics {
    /// Shows both outcomes at 0, so that the first `broken` one is an increase Prometheus sees.
    package func prepareAuditVerifications() {
        for outcome in ["ok", "broken"] {
            Counter(label: "outpost_audit_verifications_total", dimensions: [("outcome", outcome)], factory: factory).increment(by: 0)
        }
    }

    package func recordAuditVerification(_ verification: AuditChain.Verification) {
        let outcome = if case .intact = verification { "ok" } else { "broken" }
        Counter(label: "outpost_audit_verifications_total", dimensions: [("outcome", outcome)], factory: factory).increment()
    }
}
