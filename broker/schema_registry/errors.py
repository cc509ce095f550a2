"""Confluent's error bodies: ``{"error_code": int, "message": str}`` with the HTTP status of the code.

Codes of five digits carry their HTTP status in the first three (40401 is a 404); 409, 500 and
the 5xxxx codes stand for themselves.  One constructor per code, named after what went wrong, so a
handler raises ``errors.subject_not_found(subject)`` and the route turns it into the response.
"""

from __future__ import annotations


class RegistryError(Exception):
    def __init__(self, error_code: int, message: str, http_status: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        if http_status is None:
            http_status = error_code // 100 if error_code >= 10000 else error_code
        self.http_status = http_status

    def body(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}


# -- 404 ------------------------------------------------------------------------------------------

def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(40401, f"Subject '{subject}' not found.")


def version_not_found(version) -> RegistryError:
    return RegistryError(40402, f"Version {version} not found.")


def schema_not_found(schema_id=None) -> RegistryError:
    if schema_id is None:
        return RegistryError(40403, "Schema not found")
    return RegistryError(40403, f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(40405, f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(40406, f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to "
                                "delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(40407, f"Subject '{subject}' Version {version} was not deleted first before being "
                                "permanently deleted")


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(40409, f"Subject '{subject}' does not have subject-level mode configured")


def not_found(path: str) -> RegistryError:
    return RegistryError(404, f"HTTP 404 Not Found: {path}")


# -- 409 / 422 ------------------------------------------------------------------------------------

def incompatible(subject: str, messages: list[str]) -> RegistryError:
    details = "[" + ", ".join(messages) + "]"
    return RegistryError(409, f'Schema being registered is incompatible with an earlier schema for subject '
                              f'"{subject}", details: {details}')


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(42201, f"Invalid schema {detail}")


def invalid_version(version) -> RegistryError:
    return RegistryError(42202, f"The specified version '{version}' is not a valid version id. Allowed values are "
                                'between [1, 2^31-1] and the string "latest"')


def invalid_compatibility_level(level) -> RegistryError:
    return RegistryError(42203, "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                "backward_transitive, forward_transitive, and full_transitive")


def invalid_mode(mode) -> RegistryError:
    return RegistryError(42204, f"Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT: "
                                f"{mode}")


def operation_not_permitted(detail: str) -> RegistryError:
    return RegistryError(42205, detail)


def reference_exists(detail: str) -> RegistryError:
    return RegistryError(42206, f"One or more references exist to the schema {detail}.")


def id_conflict(schema_id: int) -> RegistryError:
    return RegistryError(42207, f"Overwrite new schema with id {schema_id} is not permitted.")


def invalid_request(detail: str) -> RegistryError:
    return RegistryError(422, f"Unprocessable Entity: {detail}", 422)


def bad_request(detail: str) -> RegistryError:
    return RegistryError(400, detail, 400)


# -- 401 / 403 / 5xx ------------------------------------------------------------------------------

def unauthorized() -> RegistryError:
    return RegistryError(401, "Unauthorized", 401)


def forbidden(detail: str = "Forbidden") -> RegistryError:
    return RegistryError(403, detail, 403)


def store_error(detail: str) -> RegistryError:
    return RegistryError(50001, f"Error while storing the schema: {detail}")
