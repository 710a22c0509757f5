// Package userwords turns topk's error messages into what a user is told:
// the CLI's errors and the HTTP API's 400s both pass through Of, so that
// neither shows where in topk an error arose.
package userwords

import (
	"regexp"
	"slices"
	"strings"
)

// packages are the packages under pkg/, whose errors start with their
// operation ("store.read_top: ", "rawstore.List: ", "usercount: ").
var packages = []string{"activity", "activityingest", "api", "bench", "cli", "devenv", "doctor", "events", "geo",
	"hoursum", "hourwin", "ingest", "internal", "kafka", "keys", "loadgen", "metrics", "progress", "rawstore", "replica", "scheduler", "security",
	"sketch", "store", "uniq", "usercount", "window"}

// operation matches those operations, at the start of a message or of a
// cause (after ": "). They say where in topk an error arose, which logs
// keep and users do not need. An operation may name its object:
// "kafka.ensure_topics topk.events: ".
var operation = regexp.MustCompile(`(^|: )(?:(?:` + strings.Join(packages, "|") + `)(?:\.[A-Za-z_]+(?: [^\s:]+)?)?: )+`)

// Of is an error message on one line (a cause that spans lines, such as
// pgx's one per address tried, is joined with "; ", each line once)
// without topk's operation prefixes.
func Of(msg string) string {
	if strings.Contains(msg, "\n") {
		var lines []string
		for _, l := range strings.Split(msg, "\n") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(lines, l) {
				lines = append(lines, l)
			}
		}
		msg = strings.Join(lines, "; ")
		msg = strings.ReplaceAll(msg, ":; ", ": ")
	}
	return operation.ReplaceAllString(msg, "$1")
}

// Err is Of(err.Error()).
func Err(err error) string { return Of(err.Error()) }
