package keys

import (
	"fmt"
	"strings"
)

// ParseGlobalItem inverts GlobalItem: it splits a global item id at its
// first '/' and decodes each part's %XX escapes (upper-case hex). It
// refuses an id that GlobalItem could not have produced (no '/', a bad
// escape, or a byte left unescaped that GlobalItem escapes), so that each
// accepted id names exactly one (workspace, channel).
func ParseGlobalItem(item string) (ws, ch string, err error) {
	wsEnc, chEnc, found := strings.Cut(item, "/")
	if !found {
		return "", "", fmt.Errorf("keys: global item %q has no '/' between workspace and channel", item)
	}
	if ws, err = percentDecode(wsEnc); err == nil {
		ch, err = percentDecode(chEnc)
	}
	if err != nil {
		return "", "", fmt.Errorf("keys: global item %q: %w", item, err)
	}
	if GlobalItem(ws, ch) != item {
		return "", "", fmt.Errorf("keys: global item %q is not in canonical form (want %q)", item, GlobalItem(ws, ch))
	}
	return ws, ch, nil
}

// percentDecode decodes percentEncode's %XX escapes.
func percentDecode(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape at byte %d", i)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("bad escape %q at byte %d", s[i:i+3], i)
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), nil
}

// unhex decodes one upper-case hex digit, as percentEncode writes them.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
