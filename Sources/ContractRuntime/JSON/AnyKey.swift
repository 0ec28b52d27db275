/// A coding key of any name or index: the keys of a JSON object or array as the tree decoder and
/// encoder walk it.
struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int?

    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }
}
