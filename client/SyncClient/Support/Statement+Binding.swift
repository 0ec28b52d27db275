import GRDB

extension Statement {
    /// Runs the statement with `values` bound in order, then `last`, each bound straight to the
    /// SQLite statement.
    ///
    /// `execute(arguments:)` needs a `StatementArguments`, which GRDB builds by mapping every
    /// value through an existential or a key path, then checks and binds again: on a pulled
    /// page that was most of the time spent outside SQLite per row. Arguments set empty and
    /// unchecked tell GRDB the bindings are ours; `execute()` still runs the statement through
    /// GRDB, so transaction observers (observed reads) see the change as before.
    func execute(binding values: [DatabaseValue], then last: DatabaseValue) throws {
        setUncheckedArguments(StatementArguments())
        let statement = sqliteStatement
        var index: CInt = 1
        for value in values {
            try Self.check(value.bind(to: statement, at: index), index: index)
            index += 1
        }
        try Self.check(last.bind(to: statement, at: index), index: index)
        try execute()
    }

    private static func check(_ code: CInt, index: CInt) throws {
        // SQLITE_OK is 0; binding fails only for an index past the statement's parameters.
        guard code == 0 else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot bind parameter \(index)")
        }
    }
}
