import ContractRuntime

extension ClientSchema {
    /// `client.v5.learning_attempts`: one row per attempt the learner started on this device,
    /// with what the attempt was taken on: the assessment's `revision` (sent with the
    /// submission, so the server grades it against that revision or answers with a conflict)
    /// and its time limit then. `abandoned_at` is set when the learner gives the attempt up
    /// (a retake after a revision conflict, or the answers of a deleted assessment discarded).
    /// A table of the client's own: the `Attempt` rows are the server's, and the `attempted`
    /// statement that starts an attempt has no place for a revision.
    static let learningAttemptsV5Statements = [
        """
        CREATE TABLE "\(EngineNames.ClientTable.learningAttempts.rawValue)" (
            "attempt_id" TEXT PRIMARY KEY NOT NULL,
            "assessment_id" TEXT NOT NULL,
            "assessment_revision" INTEGER NOT NULL,
            "time_limit_seconds" INTEGER,
            "started_at" INTEGER NOT NULL,
            "abandoned_at" INTEGER
        )
        """,
        #"CREATE INDEX "learning_attempts_assessment_idx" ON "learning_attempts" ("assessment_id")"#,
    ]
}
