// The dashboard's front end: no Go code of its own. This file makes it a
// module apart from github.com/mpijob/mpijob, so that `go build`, `go vet`
// and `go test ./...` never reach the Go code that npm packages ship in
// node_modules (flatted has some). The front end is built into
// dashboard/static/app, which the dashboard package embeds.
module github.com/mpijob/mpijob/dashboard/web

go 1.26.0
