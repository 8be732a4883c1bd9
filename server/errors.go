package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// An apiError is an error a client sees: an HTTP status, OpenAI's error type
// and code, and the request field at fault (param, "" for none).
type apiError struct {
	status  int
	typ     string // invalid_request_error, authentication_error, rate_limit_error, server_error, …
	code    string
	param   string
	message string
}

func (e *apiError) Error() string { return "server: " + e.message }

// badRequest is a 400 naming the field param.
func badRequest(param, format string, a ...any) *apiError {
	msg := fmt.Sprintf(format, a...)
	if param != "" {
		msg = param + ": " + msg
	}
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, message: msg}
}

// decodeError turns an encoding/json error into a 400 naming the field.
func decodeError(err error) *apiError {
	var mbe *http.MaxBytesError
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", code: "request_too_large",
			message: fmt.Sprintf("request body larger than %d bytes", mbe.Limit)}
	case errors.As(err, &te):
		field := strings.TrimPrefix(te.Field, "sampling.") // the embedded struct of the shared fields
		if field == "" {
			field = "body"
		}
		return badRequest(field, "got JSON %s, want %s", te.Value, jsonKind(te.Type.String()))
	case errors.As(err, &se):
		return badRequest("", "body is not valid JSON: %v (at byte %d)", se, se.Offset)
	}
	return badRequest("", "body is not valid JSON: %v", err)
}

// jsonKind names a Go type as the JSON value it decodes from.
func jsonKind(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	}
	return "an object"
}

// openAIError is OpenAI's error body.
type openAIError struct {
	Error openAIErrorBody `json:"error"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) openAI() openAIError {
	b := openAIErrorBody{Message: e.message, Type: e.typ}
	if e.param != "" {
		b.Param = &e.param
	}
	if e.code != "" {
		b.Code = &e.code
	}
	return openAIError{b}
}

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string             `json:"type"` // "error"
	Error anthropicErrorBody `json:"error"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (e *apiError) anthropic() anthropicError {
	typ := "invalid_request_error"
	switch e.status {
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case http.StatusServiceUnavailable:
		typ = "overloaded_error"
	case http.StatusGatewayTimeout:
		typ = "timeout_error"
	default:
		if e.status >= 500 {
			typ = "api_error"
		}
	}
	return anthropicError{Type: "error", Error: anthropicErrorBody{Type: typ, Message: e.message}}
}
