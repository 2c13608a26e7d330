// Package browsertest drives the owner console in a real browser: Debian's
// chromium, headless, through the DevTools protocol (chromedp). Its tests
// sign in, decide approvals that agents created through the API, open
// signed links (genuine, forged and reused), run the axe-core
// accessibility checker on each page and save screenshots of the inbox and
// of the balance chart.
//
// One browser serves every test of the binary; each test gets a browser
// context of its own (separate cookies). The tests skip when chromium is
// not installed, unless the environment variable CI is set, where its
// absence fails them: CI installs it (see .ci/run). axe-core comes from
// npm: `npm ci` in this directory installs the version package-lock.json
// pins into node_modules (ignored by git).
//
// Screenshots go to the directory named by GUARD_TEST_ARTIFACTS, by
// default test-artifacts/ at the repository root (ignored by git).
package browsertest
