package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"
	"unicode"
)

// pageNames are the page templates; each is parsed with the layout.
var pageNames = []string{"signin", "error", "inbox", "approval", "spends", "spend", "agents", "agent", "preview",
	"keys", "secret", "revoke", "balance"}

func parsePages(base string) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"base": func() string { return base },
		"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"whenp": func(t *time.Time) string {
			if t == nil {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		},
		"left": timeLeft,
		"text": visibleText,
		"str": func(s *string) string {
			if s == nil {
				return "—"
			}
			return *s
		},
		"lines": func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, "\n")
		},
		"title": func(s string) string {
			if s == "" {
				return s
			}
			return strings.ToUpper(s[:1]) + s[1:]
		},
	}
	layout, err := template.New("layout").Funcs(funcs).ParseFS(assets, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.Must(layout.Clone()).ParseFS(assets, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// timeLeft writes a duration for people: "14 min 5 s", "expired".
func timeLeft(d time.Duration) string {
	if d <= 0 {
		return "expired"
	}
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%d h %d min", h, m)
	case m > 0:
		return fmt.Sprintf("%d min %d s", m, s)
	}
	return fmt.Sprintf("%d s", s)
}

// visibleText shows text an agent wrote as it is: control and invisible
// formatting characters (a right-to-left override that makes "gnp.exe"
// read "exe.png") become U+FFFD, seen rather than obeyed. The template
// escapes the HTML.
func visibleText(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return unicode.ReplacementChar
		}
		return r
	}, s)
}
