# Sourced by scripts/with-postgres.sh and scripts/postgres-cluster.sh: PostgreSQL refuses to run
# as root, so as root its commands run as the system user outpost-pg (created if missing).
# Sets `as_pg` (a command prefix, empty unless root) and `pg_user`; needs a `fail` function.
as_pg=()
pg_user=
if [ "$(id -u)" -eq 0 ]; then
    pg_user=outpost-pg
    if ! id -u "$pg_user" >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin "$pg_user" \
            || fail "cannot create the system user $pg_user to run PostgreSQL as (it refuses to run as root)"
    fi
    command -v runuser >/dev/null || fail "runuser (util-linux) is needed to start PostgreSQL as $pg_user"
    as_pg=(runuser -u "$pg_user" --)
fi
