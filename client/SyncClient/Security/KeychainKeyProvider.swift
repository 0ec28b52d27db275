#if canImport(Security)
    public import Crypto
    public import Foundation
    import Security

    /// Tenant keys in the keychain (a generic password per tenant and key version, this device
    /// only, readable after the first unlock so background syncs work). Version 1's account is
    /// the tenant id, a later version's `<tenant id>#v<version>`.
    ///
    /// ```swift
    /// let keys = KeychainKeyProvider(service: "com.example.app.outpost")
    /// ```
    ///
    /// - Note: Compiled only where the `Security` framework exists (Apple platforms); elsewhere
    ///   use ``FileKeyProvider``.
    public struct KeychainKeyProvider: KeyProvider {
        /// The keychain service the keys are stored under.
        public let service: String
        /// A keychain access group shared with app extensions, if any.
        public let accessGroup: String?

        /// A provider storing keys under `service`, shared through `accessGroup` when given.
        public init(service: String = "outpost.tenant-keys", accessGroup: String? = nil) {
            self.service = service
            self.accessGroup = accessGroup
        }

        private func query(_ tenantId: String, _ version: Int) -> [String: Any] {
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
                kSecAttrAccount as String: version == 1 ? tenantId : "\(tenantId)#v\(version)",
            ]
            if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
            return query
        }

        /// The tenant's key (version 1), read from the keychain or created and stored there.
        public func key(forTenant tenantId: String) throws -> SymmetricKey {
            try key(forTenant: tenantId, version: 1)
        }

        /// Deletes the tenant's key (version 1) from the keychain.
        public func deleteKey(forTenant tenantId: String) throws {
            try deleteKey(forTenant: tenantId, version: 1)
        }

        /// Version `version` of the tenant's key, read from the keychain or created and stored there.
        public func key(forTenant tenantId: String, version: Int) throws -> SymmetricKey {
            var lookup = query(tenantId, version)
            lookup[kSecReturnData as String] = true
            lookup[kSecMatchLimit as String] = kSecMatchLimitOne
            var item: CFTypeRef?
            let status = SecItemCopyMatching(lookup as CFDictionary, &item)
            if status == errSecSuccess, let data = item as? Data, data.count == 32 {
                return SymmetricKey(data: data)
            }
            guard status == errSecItemNotFound else {
                throw KeyProviderError("the keychain refused to read the key (OSStatus \(status))")
            }
            let key = SymmetricKey(size: .bits256)
            var add = query(tenantId, version)
            add[kSecValueData as String] = key.withUnsafeBytes { Data($0) }
            add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            let added = SecItemAdd(add as CFDictionary, nil)
            if added == errSecDuplicateItem {
                // Another thread or process added it first: read theirs.
                return try self.key(forTenant: tenantId, version: version)
            }
            guard added == errSecSuccess else {
                throw KeyProviderError("the keychain refused to store the key (OSStatus \(added))")
            }
            return key
        }

        /// Deletes version `version` of the tenant's key from the keychain.
        public func deleteKey(forTenant tenantId: String, version: Int) throws {
            let status = SecItemDelete(query(tenantId, version) as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else {
                throw KeyProviderError("the keychain refused to delete the key (OSStatus \(status))")
            }
        }
    }
#endif
