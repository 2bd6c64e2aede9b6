"""Page-number pagination with a bounded page size, shared by every list endpoint."""

from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    page_size_query_param = "pageSize"
    max_page_size = 200
