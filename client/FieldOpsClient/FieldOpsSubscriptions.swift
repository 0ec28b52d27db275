import Contracts
public import SyncClient

/// The field operations app's subscriptions: a technician's own incidents before anything else.
extension SyncEngine {
    /// "Assigned to me first": subscribes to the incidents assigned to the signed-in technician
    /// (the contracts' `assigned_incidents`, filtered by the token's user on the server), pulled
    /// at the `critical` tier, before every scope and every other subscription, so a technician
    /// who opens the app in a dead zone has their own work first. The subscription follows
    /// reassignment: an incident assigned to someone else leaves the device unless something
    /// else holds it.
    ///
    /// - Throws: ``SyncClient/SubscriptionError`` when the contracts lack the subscription.
    public func subscribeToMyIncidents() throws(SubscriptionError) -> SubscriptionHandle {
        try subscribe(Subscriptions.assignedIncidents(), priority: .critical)
    }
}
