package api

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
)

// uiFiles is the live leaderboard page: plain HTML, CSS and JavaScript,
// no external resources.
//
//go:embed ui/index.html ui/app.js ui/style.css
var uiFiles embed.FS

// uiCSP allows the page only its own files and its own API: no inline
// script, nothing from another origin. Framing is left allowed: the page
// is meant for sidebars.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'"

// RegisterUI adds the live leaderboard page to mux:
//
//	GET /        the page (ui/index.html)
//	GET /ui/...  its script and style sheet
//
// The page reads /v1/top, /v1/top/global and /v1/series from the same
// origin, so mux must serve those too. Its files are public (they hold no
// data, and a browser cannot send a token when it navigates); behind Auth
// with tokens, its fetches send the read token it takes from the URL
// fragment (/#token=...) or asks for (see ui/app.js).
func RegisterUI(mux *http.ServeMux) {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded directory exists
	}
	files := http.FileServerFS(sub)
	mux.Handle("GET /ui/", uiHeaders(http.StripPrefix("/ui/", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// A file the page does not have is the API's JSON 404, not the
		// file server's plain text.
		if name := req.URL.Path; name != "" {
			if _, err := fs.Stat(sub, name); err != nil {
				writeError(w, http.StatusNotFound, fmt.Sprintf("no file %.200q under /ui/ (the page's files are app.js and style.css)", name))
				return
			}
		}
		files.ServeHTTP(w, req)
	}))))
	mux.Handle("GET /{$}", uiHeaders(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.ServeFileFS(w, req, sub, "index.html")
	})))
}

// uiHeaders marks the page's files for revalidation (a new binary serves
// new files under the same names) and applies the page's CSP.
func uiHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Security-Policy", uiCSP)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, req)
	})
}
