"""Page-number pagination with a bounded page size, shared by every list endpoint."""

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """DRF's page-number pagination, except that a `pageSize` that is not an integer from 1 to
    `max_page_size` is a 400 naming it (DRF would quietly use the default or the maximum), as is a
    `page` that is not a positive integer. A page past the last one stays DRF's 404."""

    page_size_query_param = "pageSize"
    max_page_size = 200

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError({self.page_size_query_param: [f"Give a whole number from 1 to {self.max_page_size}."]})
        return int(raw)

    def get_page_number(self, request, paginator):
        raw = request.query_params.get(self.page_query_param)
        if raw is not None and raw not in self.last_page_strings and (not (raw.isascii() and raw.isdigit()) or int(raw) < 1):
            raise ValidationError({self.page_query_param: ["Give a whole number from 1, or 'last'."]})
        return super().get_page_number(request, paginator)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
            elif parameter["name"] == self.page_query_param:
                parameter["schema"]["minimum"] = 1
        return parameters
