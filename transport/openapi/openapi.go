// Package openapi holds the machine-readable contract of the REST API, an
// OpenAPI 3.1 document served at GET /v1/openapi.json, and a validator that
// checks a request and its response against it.
//
// The document describes what the server does today: every route of
// transport/server.go, every status each route can answer, the headers and
// the exact body shapes. The tests of this package run the real service and
// validate every exchange with Check, so the document cannot drift from the
// server unnoticed.
package openapi

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

//go:embed openapi.json
var document []byte

// Document returns the OpenAPI document as JSON. The slice is shared:
// callers must not modify it.
func Document() []byte { return document }

// Validator checks request/response pairs against the document. It checks
// shapes, not keys: the document declares bearer authentication, and the
// validator accepts any credentials (or none).
//
// It is safe for concurrent use.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
	opts   *openapi3filter.Options
	// errSchema is the error envelope, for answers to requests that match no
	// documented operation (404 route_not_found, 405 method_not_allowed).
	errSchema *openapi3.Schema
}

// NewValidator loads the embedded document, validates it as OpenAPI 3.1 and
// builds a validator. Response objects are checked as documented: required
// fields, types, patterns and enums; fields the document does not declare
// are allowed, as clients are told to ignore them.
func NewValidator() (*Validator, error) { return newValidator(false) }

// NewStrictValidator is NewValidator, except that a response object holding
// a field the document does not declare is refused. The tests use it to
// prove the document lists every field the server sends.
func NewStrictValidator() (*Validator, error) { return newValidator(true) }

func newValidator(strict bool) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(document)
	if err != nil {
		return nil, fmt.Errorf("openapi: loading the document: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("openapi: the document is invalid: %w", err)
	}
	if strict {
		closeObjects(doc)
	}
	// Route on the path alone: the document's server URL is a placeholder
	// for wherever the service runs.
	routed := *doc
	routed.Servers = nil
	router, err := legacy.NewRouter(&routed)
	if err != nil {
		return nil, fmt.Errorf("openapi: building the router: %w", err)
	}
	errRef := doc.Components.Schemas["Error"]
	if errRef == nil || errRef.Value == nil {
		return nil, errors.New("openapi: the document has no Error schema")
	}
	return &Validator{
		doc:    doc,
		router: router,
		opts: &openapi3filter.Options{
			AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
			IncludeResponseStatus: true,
			// Defaults must never be written into the request being checked.
			SkipSettingDefaults: true,
		},
		errSchema: errRef.Value,
	}, nil
}

// Check validates one exchange: the request (path, query and header
// parameters, body) against its operation, then the response (the status
// is documented for the operation, the documented headers, the body
// schema).
//
// A request that breaks the document is tolerated when the server refused
// it with a 4xx: the server is right to refuse it (malformed JSON, unknown
// fields, a missing Idempotency-Key, an id of the wrong shape), and the
// response is still checked. The same request answered with anything else
// is an error, since the server then accepted what the contract forbids.
//
// A request that matches no documented path or method is an error, except
// that a 404 answer to it is checked against the error envelope (the
// router's route_not_found). A 405 (method_not_allowed) is always checked
// against the error envelope only: no documented operation answers it.
func (v *Validator) Check(req *http.Request, reqBody []byte, status int, header http.Header, respBody []byte) error {
	in, err := v.route(req, reqBody)
	// No operation answers 405: it is the router's answer to a method a path
	// does not have, as 404 is to a path that does not exist.
	if status == http.StatusMethodNotAllowed || err != nil && status == http.StatusNotFound && isRouteError(err) {
		if verr := v.checkError(respBody); verr != nil {
			return fmt.Errorf("openapi: %s %s: %d answer to an undocumented route: %w", req.Method, req.URL.Path, status, verr)
		}
		return nil
	}
	if err != nil {
		return err
	}
	ctx := context.Background()
	if rerr := openapi3filter.ValidateRequest(ctx, in); rerr != nil && (status < 400 || status > 499) {
		return fmt.Errorf("openapi: %s %s: request breaks the document but was answered %d: %w", req.Method, req.URL.Path, status, rerr)
	}
	return v.checkResponse(ctx, in, status, header, respBody)
}

// CheckResponse validates a response only, for a request the caller knows
// breaks the document (the validation of such a request is skipped).
func (v *Validator) CheckResponse(req *http.Request, status int, header http.Header, respBody []byte) error {
	in, err := v.route(req, nil)
	if err != nil {
		return err
	}
	return v.checkResponse(context.Background(), in, status, header, respBody)
}

// OperationID names the documented operation req calls, for callers that
// account for what they validated.
func (v *Validator) OperationID(req *http.Request) (string, error) {
	in, err := v.route(req, nil)
	if err != nil {
		return "", err
	}
	return in.Route.Operation.OperationID, nil
}

// CheckRequest validates a request only.
func (v *Validator) CheckRequest(req *http.Request, reqBody []byte) error {
	in, err := v.route(req, reqBody)
	if err != nil {
		return err
	}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return fmt.Errorf("openapi: %s %s: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

// route finds the operation and prepares the validation input on a copy
// of req whose body is reqBody.
func (v *Validator) route(req *http.Request, reqBody []byte) (*openapi3filter.RequestValidationInput, error) {
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	r.ContentLength = int64(len(reqBody))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(reqBody)), nil }
	route, params, err := v.router.FindRoute(r)
	if err != nil {
		return nil, fmt.Errorf("openapi: %s %s: %w", req.Method, req.URL.Path, err)
	}
	// The router matches /v1/agents to /v1/agents/{agent_id} with an empty
	// id; the server's router never does (an empty segment is no route),
	// so neither may the validator.
	for name, val := range params {
		if val == "" {
			return nil, fmt.Errorf("openapi: %s %s: %w", req.Method, req.URL.Path,
				&routers.RouteError{Reason: "path parameter " + name + " is empty: no matching operation"})
		}
	}
	return &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: v.opts}, nil
}

func (v *Validator) checkResponse(ctx context.Context, in *openapi3filter.RequestValidationInput, status int, header http.Header, body []byte) error {
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: v.opts}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("openapi: %s %s: response %d: %w", in.Request.Method, in.Request.URL.Path, status, err)
	}
	return nil
}

func (v *Validator) checkError(body []byte) error {
	val, err := decodeJSON(body)
	if err != nil {
		return err
	}
	return v.errSchema.VisitJSON(val, openapi3.EnableJSONSchema2020())
}

func decodeJSON(b []byte) (any, error) {
	var val any
	if err := json.Unmarshal(b, &val); err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	return val, nil
}

func isRouteError(err error) bool {
	var re *routers.RouteError
	return errors.As(err, &re)
}

// closeObjects forbids undeclared fields in every object schema that lists
// its properties and says nothing about others, except the conditions of
// if/then (closing those would switch their checks off). Schemas that allow others
// explicitly (the document's open objects) keep doing so.
func closeObjects(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(ref *openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			no := false
			s.AdditionalProperties.Has = &no
		}
		for _, p := range s.Properties {
			walk(p)
		}
		for _, list := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
			for _, sub := range list {
				walk(sub)
			}
		}
		walk(s.Items)
		walk(s.Not)
		// Not s.If: closing a condition would make it false for every
		// real object and silently skip its Then.
		walk(s.Then)
		walk(s.Else)
		walk(s.AdditionalProperties.Schema)
	}
	for _, ref := range doc.Components.Schemas {
		walk(ref)
	}
	for _, resp := range doc.Components.Responses {
		if resp.Value != nil {
			for _, mt := range resp.Value.Content {
				walk(mt.Schema)
			}
		}
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, resp := range op.Responses.Map() {
				if resp.Value != nil {
					for _, mt := range resp.Value.Content {
						walk(mt.Schema)
					}
				}
			}
		}
	}
}
