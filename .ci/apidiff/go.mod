// apidiff for CI (.ci/apidiff/run), pinned by the tool directive, in a
// module of its own outside go.work, as .ci/staticcheck is.
module apidiff

go 1.26.0

tool golang.org/x/exp/cmd/apidiff

require (
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.1-0.20261106145633-d407941a339a // indirect
)
