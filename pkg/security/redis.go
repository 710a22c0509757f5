package security

import (
	"regexp"
	"strings"
)

// RedisRefusal says whether, and how, Redis refused a request because of
// who the client is rather than because of the request or the network.
type RedisRefusal int

const (
	// NotRefused: any other error (unreachable, timeout, a bad reply, a
	// script error), or none.
	NotRefused RedisRefusal = iota
	// RefusedLogin: the credentials. Redis 6+ answers WRONGPASS (wrong
	// password, unknown or disabled user) or NOAUTH (none given); older
	// servers an ERR about AUTH or an invalid password.
	RefusedLogin
	// RefusedACL: the user logged in but its ACL lacks a command, a key or
	// a channel the request needs. Redis answers NOPERM, and for a command
	// a Lua script calls, an ERR saying the user "can't run this command"
	// (Redis 7.0) or "ACL failure in script" (7.2+).
	RefusedACL
)

var (
	loginRe    = regexp.MustCompile(`\b(WRONGPASS|NOAUTH)\b|\bAUTH\b|invalid password`)
	aclRe      = regexp.MustCompile(`\bNOPERM\b|can't run this command or subcommand|ACL failure in script|(?i)no permissions to (run|access)`)
	commandRe  = regexp.MustCompile(`(?i)no permissions to run the '([^']+)' command`)
	keyRe      = regexp.MustCompile(`(?i)no permissions to access (one of the keys|a key)`)
	channelRe  = regexp.MustCompile(`(?i)no permissions to access (one of the channels|a channel)`)
	inScriptRe = regexp.MustCompile(`can't run this command or subcommand|ACL failure in script`)
)

// ClassifyRedis tells a refusal by Redis of the client's credentials or
// permissions from any other error. It reads the error's text, so it sees
// through any wrapping (Redis' own messages never quote a password).
func ClassifyRedis(err error) RedisRefusal {
	if err == nil {
		return NotRefused
	}
	msg := err.Error()
	switch {
	case aclRe.MatchString(msg):
		return RefusedACL
	case loginRe.MatchString(msg):
		return RefusedLogin
	}
	return NotRefused
}

// RedisDenied describes what an ACL refusal (RefusedACL) denied, as Redis
// names it: "the command 'sscan'", "a key", "a channel", or "a command a
// Lua script calls" (Redis 7.0 does not name it inside a script).
func RedisDenied(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if m := commandRe.FindStringSubmatch(msg); m != nil {
		what := "the command '" + strings.ToLower(m[1]) + "'"
		if inScriptRe.MatchString(msg) {
			what += ", which a Lua script calls"
		}
		return what
	}
	switch {
	case inScriptRe.MatchString(msg):
		return "a command a Lua script calls"
	case keyRe.MatchString(msg):
		return "a key"
	case channelRe.MatchString(msg):
		return "a channel"
	}
	return "a command, key or channel"
}
